"""Sliding-window attention on the CPU: the profile model's reading of windowed attention ops
against the CPU runtime's measured times.

A profile measures attention without a window (it cannot know the model's). tpo reads a windowed
op off those curves at the full causal attention with the same keys per query, or, where the
window is under about half the chunk, at a shorter one with that many keys per query scaled by
FLOPs (README, the models row). This runs the CPU runtime on the tiny test model with a window on
its first layer and full attention on its second, and compares each attention op's predicted time
with its measured one, windowed and full side by side. CPU measurements only: nothing here ran on
a GPU.

Usage: python3 results/cpu/window_check.py TPO [OUT_DIR]
  e.g. python3 results/cpu/window_check.py build/cli/tpo
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# (window, prompt, strategy args): a window under half the chunk (the shorter-attention reading)
# and over it (the equivalent prefix), unsplit and in ISO chunks after a prefix.
CASES = [(128, 1024, ["--strategy", "none"]),
         (128, 1024, ["--strategy", "iso", "--chunks", "2"]),
         (384, 1024, ["--strategy", "iso", "--chunks", "4"]),
         (384, 1536, ["--strategy", "iso", "--chunks", "3"])]


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def setup(doc):
    """(TPO, OUT_DIR, the tiny test model's JSON) from `script TPO [OUT_DIR]`; exits with `doc`
    else. Shared with rope_check.py."""
    if len(sys.argv) not in (2, 3):
        sys.exit(doc)
    out = sys.argv[2] if len(sys.argv) == 3 else tempfile.mkdtemp()
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(ROOT, "tests/data/tiny_model.json")) as f:
        return sys.argv[1], out, json.load(f)


def main():
    tpo, out, base = setup(__doc__)
    rows, errs = [], {True: [], False: []}
    for window, seq, strat in CASES:
        model = dict(base, name=f"tiny-w{window}", sliding_window=window,
                     layer_types=["sliding_attention", "full_attention"])
        mpath = os.path.join(out, f"tiny-w{window}.json")
        with open(mpath, "w") as f:
            json.dump(model, f)
        prof = os.path.join(out, f"tiny-w{window}-profile.json")
        if not os.path.exists(prof):
            run([tpo, "profile", "--backend", "cpu", "--model", mpath, "--tp", "2",
                 "--hardware", "cpu-host", "--out", prof])
        rep = os.path.join(out, f"validate-w{window}-{seq}-{'-'.join(strat[1:])}.json")
        run([tpo, "validate", "--backend", "cpu", "--model", mpath, "--hardware", "cpu-host",
             "--tp", "2", "--seq", str(seq), "--repeat", "5", "--profile", prof, "--json", rep]
            + strat)
        with open(rep) as f:
            case = json.load(f)["cases"][0]
        for op in case["ops"]:
            if op["name"] != "attention":
                continue
            windowed = op["layer"] == 0
            err = op["predicted_us"] / op["measured_us"] - 1
            errs[windowed].append(err)
            rows.append((window, seq, " ".join(strat[1:]), op["layer"], op["chunk"],
                         "window" if windowed else "full", op["predicted_us"], op["measured_us"],
                         err))
    print(f"tpo validate --backend cpu, tiny test model (TP 2; layer 0 windowed, layer 1 full), "
          f"profiled on this CPU; each op's time is the median of 5 runs")
    print(f"{'window':>6} {'prompt':>6} {'strategy':<12} {'layer':>5} {'chunk':>5} {'kind':<6} "
          f"{'pred us':>9} {'meas us':>9} {'error':>7}")
    for w, s, st, layer, chunk, kind, p, m, e in rows:
        print(f"{w:>6} {s:>6} {st:<12} {layer:>5} {chunk:>5} {kind:<6} {p:>9.1f} {m:>9.1f} "
              f"{e:>+7.1%}")
    for windowed in (True, False):
        e = [abs(x) for x in errs[windowed]]
        print(f"{'windowed' if windowed else 'full'} attention ops: {len(e)}, median |error| "
              f"{statistics.median(e):.1%}, worst {max(e):.1%}, mean signed "
              f"{statistics.mean(errs[windowed]):+.1%}")


if __name__ == "__main__":
    main()
