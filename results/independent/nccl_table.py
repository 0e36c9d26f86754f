"""The all-reduce table of configs/hardware/h100x8.json (and h100x16, h200x8) from NVIDIA's
published nccl-tests run, and how well it and the former latency + bandwidth model hold.

Usage: python3 results/independent/nccl_table.py [TABLE [LATENCY_US BUSBW_GBPS [OTHER]]]
  default: results/independent/h100-nccl-tests-dgxc.txt 8 476 (h100x8.json before 2026-12-03);
  rtx4090x8:  results/independent/rtx4090-nccl-tests-chlc.txt 40 18
  a100x8:     results/independent/a100-nccl-tests-oci.txt 10 210
  h100x8 at 4 ranks: results/independent/h100x4-nccl-tests-graph.txt 8 476
                     results/independent/h100x4-nccl-tests-eager.txt
  (each the file's latency + bandwidth model as it stood before the table was read, plus the
  2 us per-kernel term of every hardware file; the rank count is the number of "Rank" lines
  under "# Using devices", else the header's nGpus, else 8)

Prints:
1. the in-place times as the hardware files' "allreduce_table.points" ([bytes, us]); tpo's
   runtime all-reduces in place (ncclAllReduce(buf, buf, ...)) (NVIDIA's H100 table's
   out-of-place column also has two one-off spikes: 32 B: 68 us, 4 KiB: 24 us, against 13.5 and
   16.5 in place);
2. leave-one-out: each size between two others read off the table without it (log-log, as tpo
   interpolates), the error of the interpolation itself;
3. the former model (latency + 2 us per-kernel term + bus bytes at the bus bandwidth) against
   the table, per size;
4. for NVIDIA's H100 table only, an independent check: SGLang PR #22734's "pynccl graph" column (NCCL through PyTorch, CUDA
   graph, one 8-GPU node, presumably H200: the excerpt's next table is "Two-node (H200, TP=16)"),
   against the table read at the same sizes.
5. with OTHER, a second run of the same machine and rank count: the table (with tpo's reading
   beyond its largest size) against OTHER's in-place times at every size OTHER has. With
   OTHER a rows-only file at another rank count (a comment line "# ranks: N"), the former
   model against those rows instead.
Nothing is fitted: the table is the published measurement, interpolated."""
import json
import math
import statistics
import sys

PATH = sys.argv[1] if len(sys.argv) > 1 else "results/independent/h100-nccl-tests-dgxc.txt"
KERNEL_US = 2.0
RANKS = 8  # set from the run in main()
OLD_LATENCY_US, BUSBW = ((float(sys.argv[2]), float(sys.argv[3])) if len(sys.argv) > 3
                         else (8.0, 476.0))  # h100x8.json before 2026-12-03
H100 = PATH.endswith("h100-nccl-tests-dgxc.txt")
OTHER = sys.argv[4] if len(sys.argv) > 4 else None

# github.com/sgl-project/sglang/pull/22734 (merged), description, first table, "pynccl graph"
# column, all times in us; KiB sizes.
SGLANG_PYNCCL_GRAPH = [(2, 16.84), (4, 16.99), (8, 17.23), (16, 17.75), (32, 19.63),
                       (64, 19.92), (128, 20.13), (256, 20.31), (512, 20.86), (1024, 27.00)]


def former(b, ranks, latency_us=None, kernel_us=KERNEL_US, busbw=None):
    """A latency + bandwidth model: latency + the per-kernel term + bus bytes at busbw."""
    latency_us = OLD_LATENCY_US if latency_us is None else latency_us
    busbw = busbw or BUSBW
    return latency_us + kernel_us + 2 * (ranks - 1) / ranks * b / busbw / 1e3


def read_rows(path):
    rows = []
    for line in open(path):
        w = line.split()
        if len(w) == 13 and w[0].isdigit():
            rows.append((int(w[0]), float(w[5]), float(w[9])))  # bytes, out-of-place, in-place
    return rows


def read_ranks(path):
    """The ranks of a run: its "Rank" device lines, else a "# ranks: N" comment, else the
    header's nGpus when above 1 (one process driving several GPUs), else 8."""
    devices, ngpus, stated = 0, None, None
    for line in open(path):
        w = line.split()
        if len(w) > 2 and w[0] == "#" and w[1] == "Rank" and w[2].isdigit():
            devices += 1
        if "nGpus" in w and w.index("nGpus") + 1 < len(w):
            ngpus = int(w[w.index("nGpus") + 1])
        if w[:2] == ["#", "ranks:"]:
            stated = int(w[2])
    return devices or stated or (ngpus if ngpus and ngpus > 1 else 8)


def interp(pts, x, ranks=None, busbw=None):
    """tpo's table read (sim/analytical_cost.cc): log-log between points, flat below; above,
    the extra bus bytes at the last step's bandwidth, kept between the average the last point
    reached and the link's bus bandwidth (BUSBW)."""
    ranks = ranks or RANKS
    busbw = busbw or BUSBW
    if x <= pts[0][0]:
        return pts[0][1]
    if x >= pts[-1][0]:
        bus = 2 * (ranks - 1) / ranks
        (b0, t0), (b1, t1) = pts[-2], pts[-1]
        reached = bus * b1 / (t1 * 1e3)
        step = bus * (b1 - b0) / ((t1 - t0) * 1e3) if t1 > t0 else math.inf
        return t1 + bus * (x - b1) / min(busbw, max(reached, step)) / 1e3
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x0 <= x <= x1:
            f = (math.log(x) - math.log(x0)) / (math.log(x1) - math.log(x0))
            return math.exp(math.log(y0) + f * (math.log(y1) - math.log(y0)))


def summary(errs):
    a = sorted(abs(e) for e in errs)
    p90 = a[min(len(a) - 1, len(a) * 9 // 10)]
    return (f"median |error| {100 * statistics.median(a):.1f}%, p90 {100 * p90:.1f}%, "
            f"worst {100 * a[-1]:.1f}%, mean signed {100 * statistics.mean(errs):+.1f}% "
            f"({len(a)} sizes)")


def main():
    global RANKS
    rows = read_rows(PATH)
    RANKS = read_ranks(PATH)
    pts = [(b, ip) for b, _, ip in rows]
    print(f"source: {PATH}, {len(rows)} sizes, {RANKS} ranks\n")
    print("1. allreduce_table.points (in-place times):")
    print(json.dumps([[b, t] for b, t in pts]))

    print("\n2. leave-one-out interpolation (each size between two others, read without it):")
    loo = []
    for i in range(1, len(pts) - 1):
        rest = pts[:i] + pts[i + 1:]
        loo.append((interp(rest, pts[i][0]) - pts[i][1]) / pts[i][1])
    print("   all:", summary(loo))
    small = [e for (b, _), e in zip(pts[1:-1], loo) if b <= 1 << 20]
    print("   up to 1 MiB (decode):", summary(small))

    print(f"\n3. the former model ({OLD_LATENCY_US:g} us + {KERNEL_US:g} us + bus bytes at {BUSBW:g} GB/s) "
          "against the table:")
    print(f"   {'bytes':>12} {'in-place us':>12} {'out-of-place':>13} {'former model':>13} {'error':>7}")
    old = []
    for b, op, ip in rows:
        m = former(b, RANKS)
        old.append((b, (m - ip) / ip))
        print(f"   {b:>12} {ip:>12.2f} {op:>13.2f} {m:>13.2f} {100 * (m - ip) / ip:>6.1f}%")
    print("   up to 1 MiB:", summary([e for b, e in old if b <= 1 << 20]))
    print("   2 MiB - 128 MiB (prefill chunks):", summary([e for b, e in old if (1 << 21) <= b <= 1 << 27]))
    print("   all:", summary([e for _, e in old]))

    if H100:
        print("\n4. SGLang PR #22734, pynccl graph (presumably 8x H200), against the table:")
        print(f"   {'KiB':>6} {'published us':>13} {'table us':>9} {'error':>7}")
        ind = []
        for kib, us in SGLANG_PYNCCL_GRAPH:
            t = interp(pts, kib * 1024)
            ind.append((t - us) / us)
            print(f"   {kib:>6} {us:>13.2f} {t:>9.2f} {100 * (t - us) / us:>6.1f}%")
        print("  ", summary(ind))

    if OTHER:
        other, other_ranks = read_rows(OTHER), read_ranks(OTHER)
        if other_ranks == RANKS:
            print(f"\n5. the table (read beyond {pts[-1][0]} B as tpo reads it, bus bandwidth bound "
                  f"{BUSBW:g} GB/s) against {OTHER}, in-place:")
            print(f"   {'bytes':>12} {'other us':>10} {'table us':>9} {'error':>7}  {'where':<6} "
                  f"{'former model':>12} {'error':>7}")
            errs, old_errs = [], []
            for b, _, ip in other:
                t = interp(pts, b)
                m = former(b, RANKS)
                errs.append((b, (t - ip) / ip))
                old_errs.append((b, (m - ip) / ip))
                where = "beyond" if b > pts[-1][0] else "inside"
                print(f"   {b:>12} {ip:>10.2f} {t:>9.2f} {100 * (t - ip) / ip:>6.1f}%  {where:<6} "
                      f"{m:>12.2f} {100 * (m - ip) / ip:>6.1f}%")
            print("   the table, inside it:", summary([e for b, e in errs if b <= pts[-1][0]]))
            print("   the table, beyond it:", summary([e for b, e in errs if b > pts[-1][0]]))
            print("   the former model, beyond the table's sizes:",
                  summary([e for b, e in old_errs if b > pts[-1][0]]))
        else:
            print(f"\n5. the former model ({OLD_LATENCY_US:g} us + {KERNEL_US:g} us + bus bytes at "
                  f"{BUSBW:g} GB/s) against {OTHER} ({other_ranks} ranks), in-place:")
            errs = []
            for b, _, ip in other:
                m = former(b, other_ranks)
                errs.append((m - ip) / ip)
                print(f"   {b:>12} {ip:>12.2f} {m:>13.2f} {100 * (m - ip) / ip:>6.1f}%")
            print("  ", summary(errs))


if __name__ == "__main__":
    main()
