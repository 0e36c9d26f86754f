"""The residual add fused with the next norm on the CPU: each fused op (add, then the next
module's RMSNorm, one kernel: cpu::add_rmsnorm) predicted from a CPU profile that timed it
(add_rmsnorm rows) against the CPU runtime's measured times; and what fusing saves per layer,
measured (the separate run's residual adds and the norms they feed, less the fused run's adds)
against predicted.

This validates two small models on this VM's CPU, unsplit and in ISO chunks, with
--add-norm fused and --add-norm separate, from one profile. CPU measurements only: nothing here
ran on a GPU, where the saving (a pass over the residual from HBM and a kernel's start and drain)
is larger than on a CPU, whose caches hold these rows.

Usage: python3 results/cpu/add_norm_check.py TPO [OUT_DIR]
  e.g. python3 results/cpu/add_norm_check.py build/cli/tpo
"""
import json
import os
import statistics

from window_check import run, setup

MODELS = [("tiny", {}),
          ("small-h1024", {"hidden_size": 1024, "num_attention_heads": 8, "num_key_value_heads": 2,
                           "head_dim": 128, "intermediate_size": 2048})]
CASES = [(1024, ["--strategy", "none"]), (1024, ["--strategy", "iso", "--chunks", "2"]),
         (2048, ["--strategy", "iso", "--chunks", "3"])]
NORMS = ("attn_norm", "mlp_norm", "residual_add")


def case_of(tpo, mpath, prof, seq, strat, add_norm, rep):
    # A report already in OUT_DIR is read again, not re-measured (as the profiles are).
    if not os.path.exists(rep):
        run([tpo, "validate", "--backend", "cpu", "--model", mpath, "--hardware", "cpu-host",
             "--tp", "2", "--seq", str(seq), "--repeat", "5", "--profile", prof, "--add-norm",
             add_norm, "--json", rep] + strat)
    with open(rep) as f:
        return json.load(f)["cases"][0]


def median_error(case, pick):
    e = [op["predicted_us"] / op["measured_us"] - 1 for op in case["ops"] if pick(op)]
    return statistics.median(e) if e else float("nan")


def rowwise_us(case, key):
    """Sum over the case's residual adds and norms of `key` (predicted_us or measured_us)."""
    return sum(op[key] for op in case["ops"] if op["name"] in NORMS)


def main():
    tpo, out, base = setup(__doc__)
    rows, errs, saves, totals, beside = [], [], [], [], []
    for name, changes in MODELS:
        mpath = os.path.join(out, f"{name}.json")
        with open(mpath, "w") as f:
            json.dump(dict(base, name=name, **changes), f)
        prof = os.path.join(out, f"{name}-profile.json")
        if not os.path.exists(prof):
            run([tpo, "profile", "--backend", "cpu", "--model", mpath, "--tp", "2",
                 "--hardware", "cpu-host", "--max-tokens", "2048", "--quiet", "--out", prof])
        for seq, strat in CASES:
            tag = f"{name}-{seq}-{'-'.join(strat[1:])}"
            got = {a: case_of(tpo, mpath, prof, seq, strat, a,
                              os.path.join(out, f"validate-{tag}-{a}.json"))
                   for a in ("fused", "separate")}
            fused = got["fused"]
            for op in fused["ops"]:
                if op["name"] != "residual_add" or "norm_after" not in op:
                    continue
                err = op["predicted_us"] / op["measured_us"] - 1
                errs.append(err)
                rows.append((name, seq, " ".join(strat[1:]), op["layer"], op["chunk"],
                             op["norm_after"], op["predicted_us"], op["measured_us"], err))
            # The fused adds against the other memory-bound ops and the GEMMs of the same run: on
            # this VM two rank threads share two cores and their memory bandwidth, which moves
            # every memory-bound op of a run together.
            for a in ("fused", "separate"):
                c = got[a]
                beside.append((name, seq, " ".join(strat[1:]), a,
                               median_error(c, lambda op: "norm_after" in op),
                               median_error(c, lambda op: op["name"] in NORMS + ("silu_mul",)
                                            and "norm_after" not in op),
                               median_error(c, lambda op: op["kind"] == "gemm")))
            layers = fused["num_layers"]
            saves.append(tuple((rowwise_us(got["separate"], k) - rowwise_us(fused, k)) / layers
                               for k in ("measured_us", "predicted_us")))
            for a in ("fused", "separate"):
                c = got[a]
                totals.append((name, seq, " ".join(strat[1:]), a, c["predicted_us"],
                               c["measured_us"]))
    print("tpo validate --backend cpu on cpu-host, TP 2, profiled on this CPU (the fused add and "
          "norm timed as add_rmsnorm rows); each op's time is the median of 5 runs")
    print(f"{'model':<12} {'prompt':>6} {'strategy':<16} {'layer':>5} {'chunk':>5} "
          f"{'norm after':<10} {'pred us':>9} {'meas us':>9} {'error':>7}")
    for m, s, st, layer, chunk, norm, p, meas, e in rows:
        print(f"{m:<12} {s:>6} {st:<16} {layer:>5} {chunk:>5} {norm:<10} {p:>9.1f} {meas:>9.1f} "
              f"{e:>+7.1%}")
    e = [abs(x) for x in errs]
    print(f"fused residual adds: {len(e)}, median |error| {statistics.median(e):.1%}, worst "
          f"{max(e):.1%}, mean signed {statistics.mean(errs):+.1%}")
    meas = [a for a, _ in saves]
    pred = [b for _, b in saves]
    print(f"what fusing saves per layer (separate - fused, residual adds and norms, {len(saves)} "
          f"cases): measured median {statistics.median(meas):.1f} us (from {min(meas):.1f} to "
          f"{max(meas):.1f}), predicted median {statistics.median(pred):.1f} us (from "
          f"{min(pred):.1f} to {max(pred):.1f})")
    print("median error per run: fused adds | the run's other norms, adds and SiLU*mul | GEMMs")
    for m, s, st, a, f, o, g in beside:
        fused = f"{f:+7.1%}" if f == f else "      -"
        print(f"  {m:<12} {s:>6} {st:<16} {a:<9} {fused} | {o:+7.1%} | {g:+7.1%}")
    print("whole cases, predicted / measured us:")
    for m, s, st, a, p, meas in totals:
        print(f"  {m:<12} {s:>6} {st:<16} {a:<9} {p:>10.1f} / {meas:>10.1f} {p / meas - 1:>+7.1%}")


if __name__ == "__main__":
    main()
