"""The 4-rank all-reduce table of configs/hardware/h100x8.json (and h100x16, h200x8) from two
published runs on the same quiet 4x H100 machine, and how well it and the former latency +
bandwidth model hold.

Usage: python3 results/independent/h100x4_table.py

The table (nothing fitted, nothing scaled):
- 1 KiB to 2 MiB: h100x4-torch-graph-quiet.txt, "graph_us": one all-reduce replayed from a
  CUDA graph, one process per GPU (torchrun), quiet machine: no per-call launch work of PyTorch
  or NCCL is in it. Below 2 MiB the eager runs of that machine sit on a ~21-24 us host floor
  (both the torch one, one process per GPU, and nccl-tests, one process for four GPUs).
- 4 MiB to 8 GiB: h100x4-nccl-tests-eager.txt, in-place times, the same quiet session: at
  these sizes the GPU, not the host, decides the time.
Where both runs have a size (2 and 4 MiB), they agree within 1.2% (printed below): the join.

Prints:
1. the table as the hardware files' "allreduce_table.points";
2. the two runs at the sizes both have (the join);
3. leave-one-out: each size read from its neighbours without it (log-log, as tpo reads);
4. the same run's repeated sizes ("llm_points", measured again later in that run) read off
   the table: the run-to-run spread;
5. the shared-machine nccl-tests run captured as a CUDA graph (h100x4-nccl-tests-graph.txt,
   other tenants on the host), against the table;
6. the former model (8 us + 2 us per kernel + bus bytes at 476 GB/s; h200x8: 8 + 2.1 us at
   475) against the table;
7. the 2-rank rows (h100x2-nccl-tests-large.txt, 256 MiB to 8 GiB) against the former model,
   which prices TP 2 still."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nccl_table import former, interp, read_rows, summary  # noqa: E402

D = os.path.dirname(os.path.abspath(__file__))
RANKS = 4
JOIN = 2 << 20  # 2 MiB: graph times up to it, nccl-tests eager above


def torch_run(path):
    text = "".join(l for l in open(path) if not l.startswith("#"))
    return json.loads(text)


def main():
    tj = torch_run(os.path.join(D, "h100x4-torch-graph-quiet.txt"))
    graph = {p["bytes"]: p["graph_us"] for p in tj["size_sweep"]}
    eager = {b: ip for b, _, ip in read_rows(os.path.join(D, "h100x4-nccl-tests-eager.txt"))}
    pts = [(b, round(t, 2)) for b, t in sorted(graph.items()) if b <= JOIN]
    pts += [(b, t) for b, t in sorted(eager.items()) if b > JOIN]
    print(f"table: {len(pts)} sizes, {RANKS} ranks, {pts[0][0]} B to {pts[-1][0]} B\n")
    print("1. allreduce_table.points:")
    print(json.dumps([[b, t] for b, t in pts]))

    print("\n2. the join: sizes both quiet runs have (torch CUDA graph, one process per GPU, "
          "against nccl-tests eager, in place)")
    for b in sorted(set(graph) & set(eager)):
        g, e = graph[b], eager[b]
        print(f"   {b:>9} B  graph {g:7.2f} us  nccl-tests eager {e:7.2f} us  "
              f"{100 * (g - e) / e:+6.1f}%{'  (eager on its host floor)' if e > g else ''}")

    print("\n3. leave-one-out interpolation (each size between two others, read without it):")
    loo = []
    for i in range(1, len(pts) - 1):
        rest = pts[:i] + pts[i + 1:]
        loo.append((pts[i][0], (interp(rest, pts[i][0], RANKS, 476.0) - pts[i][1]) / pts[i][1]))
    print("   all:", summary([e for _, e in loo]))
    print("   up to 1 MiB:", summary([e for b, e in loo if b <= 1 << 20]))

    print("\n4. the same run's repeated sizes (llm_points, graph_us) read off the table:")
    rep = []
    for p in tj["llm_points"]:
        t = interp(pts, p["bytes"], RANKS, 476.0)
        rep.append((t - p["graph_us"]) / p["graph_us"])
        print(f"   {p['name']:11s} {p['bytes']:>8} B  measured again {p['graph_us']:6.2f} us  "
              f"table {t:6.2f} us  {100 * rep[-1]:+6.1f}%")
    print("  ", summary(rep))

    print("\n5. nccl-tests captured as a CUDA graph on the same GPUs with other tenants on the "
          "host (h100x4-nccl-tests-graph.txt, in place), against the table:")
    shared = []
    for b, _, ip in read_rows(os.path.join(D, "h100x4-nccl-tests-graph.txt")):
        t = interp(pts, b, RANKS, 476.0)
        shared.append((b, (ip - t) / t))
        print(f"   {b:>9} B  shared-host graph {ip:7.2f} us  table {t:7.2f} us  "
              f"{100 * (ip - t) / t:+6.1f}%")
    print("   up to 1 MiB:", summary([e for b, e in shared if b <= 1 << 20]))
    print("   2-16 MiB:", summary([e for b, e in shared if b > 1 << 20]))

    for name, lat, kern, bw in (("h100x8, h100x16", 8.0, 2.0, 476.0), ("h200x8", 8.0, 2.1, 475.0)):
        print(f"\n6. the former model of {name} ({lat:g} us + {kern:g} us + bus bytes at {bw:g} "
              "GB/s) against the table:")
        errs = []
        for b, t in pts:
            m = former(b, RANKS, lat, kern, bw)
            errs.append((b, (m - t) / t))
            print(f"   {b:>11} B  table {t:9.2f} us  former model {m:9.2f} us  "
                  f"{100 * (m - t) / t:+6.1f}%")
        print("   up to 1 MiB:", summary([e for b, e in errs if b <= 1 << 20]))
        print("   2 MiB - 128 MiB (prefill chunks):",
              summary([e for b, e in errs if (1 << 21) <= b <= 1 << 27]))
        print("   all:", summary([e for _, e in errs]))

    print("\n7. the 2-rank rows (h100x2-nccl-tests-large.txt, in place) against the former model "
          "(8 us + 2 us + bus bytes at 476 GB/s), which still prices TP 2:")
    two = []
    for b, _, ip in read_rows(os.path.join(D, "h100x2-nccl-tests-large.txt")):
        m = former(b, 2, 8.0, 2.0, 476.0)
        two.append((m - ip) / ip)
        print(f"   {b:>11} B  measured {ip:9.2f} us  former model {m:9.2f} us  "
              f"{100 * (m - ip) / ip:+6.1f}%")
    print("  ", summary(two))


if __name__ == "__main__":
    main()
