"""Rotary embeddings on the CPU: the qkv op (GEMM, rotary kernel, KV-cache write) predicted from
a CPU profile against the CPU runtime's measured times, with the kernel (--rope kernel, which the
profile timed) and without it (--rope none: the profile model takes the analytical kernel off).

The profile times qkv as the runtime runs it, rotary kernel included (qkv_rope_dim in the
profile). This validates two small models on this VM's CPU, unsplit and in ISO chunks, with and
without the kernel, and compares each qkv op's predicted time with its measured one; and what
the kernel adds, measured (kernel - none, per qkv op) against predicted (the analytical kernel
at cpu-host's bandwidth and per-kernel term). CPU measurements only: nothing here ran on a GPU.

Usage: python3 results/cpu/rope_check.py TPO [OUT_DIR]
  e.g. python3 results/cpu/rope_check.py build/cli/tpo
"""
import json
import os
import statistics

from window_check import run, setup

# Two models: the test fixture (head_dim 32) and one with Llama's head_dim 128 and a partial
# rotary factor of 0.5 (64 values of each head rotated).
MODELS = [("tiny", {}),
          ("small-hd128", {"hidden_size": 512, "num_attention_heads": 4, "num_key_value_heads": 2,
                           "head_dim": 128, "intermediate_size": 1024,
                           "partial_rotary_factor": 0.5, "rope_theta": 500000.0})]
CASES = [(1024, ["--strategy", "none"]), (1024, ["--strategy", "iso", "--chunks", "2"]),
         (2048, ["--strategy", "iso", "--chunks", "3"])]


def qkv_ops(tpo, mpath, prof, seq, strat, rope, rep):
    run([tpo, "validate", "--backend", "cpu", "--model", mpath, "--hardware", "cpu-host",
         "--tp", "2", "--seq", str(seq), "--repeat", "5", "--profile", prof, "--rope", rope,
         "--json", rep] + strat)
    with open(rep) as f:
        case = json.load(f)["cases"][0]
    return [op for op in case["ops"] if op["name"] == "qkv"]


def main():
    tpo, out, base = setup(__doc__)
    rows, errs, adds = [], {"kernel": [], "none": []}, []
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
            got = {}
            for rope in ("kernel", "none"):
                got[rope] = qkv_ops(tpo, mpath, prof, seq, strat, rope,
                                    os.path.join(out, f"validate-{tag}-{rope}.json"))
                for op in got[rope]:
                    err = op["predicted_us"] / op["measured_us"] - 1
                    errs[rope].append(err)
                    rows.append((name, seq, " ".join(strat[1:]), rope, op["layer"], op["chunk"],
                                 op["predicted_us"], op["measured_us"], err))
            for k, n in zip(got["kernel"], got["none"]):
                adds.append((k["measured_us"] - n["measured_us"],
                             k["predicted_us"] - n["predicted_us"]))
    print("tpo validate --backend cpu on cpu-host, TP 2, profiled on this CPU (qkv timed with its "
          "rotary kernel); each op's time is the median of 5 runs")
    print(f"{'model':<12} {'prompt':>6} {'strategy':<10} {'rope':<6} {'layer':>5} {'chunk':>5} "
          f"{'pred us':>9} {'meas us':>9} {'error':>7}")
    for m, s, st, rope, layer, chunk, p, meas, e in rows:
        print(f"{m:<12} {s:>6} {st:<10} {rope:<6} {layer:>5} {chunk:>5} {p:>9.1f} {meas:>9.1f} "
              f"{e:>+7.1%}")
    for rope in ("kernel", "none"):
        e = [abs(x) for x in errs[rope]]
        print(f"qkv ops, --rope {rope}: {len(e)}, median |error| {statistics.median(e):.1%}, "
              f"worst {max(e):.1%}, mean signed {statistics.mean(errs[rope]):+.1%}")
    meas = [a for a, _ in adds]
    pred = [b for _, b in adds]
    print(f"what the kernel adds per qkv op (kernel - none, {len(adds)} ops): measured median "
          f"{statistics.median(meas):.1f} us (from {min(meas):.1f} to {max(meas):.1f}), predicted "
          f"median {statistics.median(pred):.1f} us (from {min(pred):.1f} to {max(pred):.1f})")


if __name__ == "__main__":
    main()
