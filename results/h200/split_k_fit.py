#!/usr/bin/env python3
"""Fits the analytical model's split-K term (`efficiency.gemm_split_k_us`: GPU time a GEMM that
splits K adds to sum its partials) on one H200 profile's GEMMs and reports it on the other,
kept out of the fit. Every other constant of configs/hardware/h200x8.json stays as it is.
Objective: mean squared relative error of the fit-on profile's GEMMs (as `tpo calibrate`).

usage: split_k_fit.py TPO FIT_PROFILE HELD_OUT_PROFILE [HARDWARE_JSON]
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile


def gemm_errors(tpo, hardware, profile, tmp):
    out = os.path.join(tmp, "acc.json")
    subprocess.run([tpo, "profile", "accuracy", profile, "--hardware", hardware, "--json", out],
                   check=True, capture_output=True)
    points = json.load(open(out))["profiles"][0]["points"]
    gemms = [p for p in points if p["key"].split(" ")[0] in ("qkv", "o_proj", "gate_up", "down")]
    return [(p["key"], p["error"]) for p in gemms]


def summary(errs):
    a = sorted(abs(e) for _, e in errs)
    p90 = a[min(len(a) - 1, int(round(0.9 * (len(a) - 1))))]
    return (f"median {statistics.median(a):5.1%}  p90 {p90:5.1%}  worst {a[-1]:5.1%}  "
            f"mean signed {statistics.mean(e for _, e in errs):+5.1%}")


def thin(errs):
    return [(k, e) for k, e in errs if int(k.split(" ")[1]) <= 384]


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    tpo, fit_on, held_out = sys.argv[1:4]
    hw_path = sys.argv[4] if len(sys.argv) == 5 else "configs/hardware/h200x8.json"
    hw = json.load(open(hw_path))
    grid = [x / 4 for x in range(0, 33)]  # 0 to 8 us
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for v in grid:
            hw["efficiency"]["gemm_split_k_us"] = v
            path = os.path.join(tmp, "h200x8-split-k.json")
            json.dump(hw, open(path, "w"))
            fit = gemm_errors(tpo, path, fit_on, tmp)
            results.append((statistics.mean(e * e for _, e in fit), v, fit,
                            gemm_errors(tpo, path, held_out, tmp)))
    best = min(results)
    print(f"fit on {fit_on} ({len(best[2])} GEMM shapes); held out {held_out}")
    print(f"{'split_k_us':>10}  {'fit-on MSE':>10}  fit-on GEMMs / held-out GEMMs")
    for mse, v, fit, held in results:
        mark = " <- best" if v == best[1] else ""
        print(f"{v:10.2f}  {mse:10.5f}  {summary(fit)}  |  {summary(held)}{mark}")
    for name, idx in (("fit-on", 2), ("held-out", 3)):
        for label, r in (("without the term", results[0]), (f"at {best[1]:.2f} us", best)):
            print(f"{name:9} {label:17} all: {summary(r[idx])};  rows <= 384: {summary(thin(r[idx]))}")


if __name__ == "__main__":
    main()
