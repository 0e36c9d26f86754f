#!/usr/bin/env python3
"""Compares tpo's analytical GEMM predictions with the published H200 timings in a CSV
(h200-tileops-nightly-2026-09-06.csv: published by TileOPs' nightly benchmark, not measured
by tpo). Predictions come from gemm_check.sh (the down projection of a synthetic one-layer
model, `tpo simulate --strategy none`), which includes the hardware file's per-GEMM term
(`gemm_overhead_us`). "kernels" is how many kernels the published torch-cublas call ran.

usage: tileops_check.py TPO HARDWARE CSV
"""
import csv
import os
import statistics
import subprocess
import sys


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    tpo, hardware, path = sys.argv[1:]
    rows = list(csv.DictReader(line for line in open(path) if not line.startswith("#")))
    here = os.path.dirname(os.path.abspath(__file__))
    shapes = sorted({(int(r["m"]), int(r["n"]), int(r["k"])) for r in rows})
    run = subprocess.run(
        [os.path.join(here, "gemm_check.sh"), tpo, hardware] + [f"{m} {n} {k}" for m, n, k in shapes],
        capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"gemm_check.sh failed:\n{run.stderr}")
    out = run.stdout
    predicted = {}
    for line in out.splitlines():
        mnk, _, us = line.split()[:3]
        predicted[tuple(int(x) for x in mnk.split("x"))] = float(us)

    print(f"{'label':26} {'M x N x K':>18} {'dtype':5} {'published us':>12} {'cublas kernels':>14} "
          f"{'predicted us':>12} {'error':>7} {'vs cublaslt-best':>16}")
    groups = {"2048-16k rows": [], "thin (M <= 128)": [], "other": []}
    for r in rows:
        shape = (int(r["m"]), int(r["n"]), int(r["k"]))
        pub = float(r["torch_cublas_ms"]) * 1e3
        best = float(r["cublaslt_best_ms"]) * 1e3
        pred = predicted[shape]
        err = pred / pub - 1
        err_best = pred / best - 1
        m = shape[0]
        group = "2048-16k rows" if 2048 <= m <= 16384 else "thin (M <= 128)" if m <= 128 else "other"
        groups[group].append((err, err_best, r["dtype"]))
        print(f"{r['label']:26} {'x'.join(map(str, shape)):>18} {r['dtype']:5} {pub:12.1f} "
              f"{r['torch_cublas_kernels']:>14} {pred:12.1f} {err:+7.1%} {err_best:+16.1%}")
    print()
    def summary(name, errs):
        a = sorted(abs(e) for e, _, _ in errs)
        b = sorted(abs(e) for _, e, _ in errs)
        signed = statistics.mean(e for e, _, _ in errs)
        print(f"{name:22} n={len(errs):2}  vs torch-cublas: median |error| {statistics.median(a):5.1%}, "
              f"worst {a[-1]:5.1%}, mean signed {signed:+5.1%};  vs cublaslt-best: median "
              f"{statistics.median(b):5.1%}, worst {b[-1]:5.1%}")

    for name, errs in groups.items():
        if not errs:
            continue
        summary(name, errs)
        bf16 = [e for e in errs if e[2] == "bf16"]
        if 0 < len(bf16) < len(errs):
            summary(f"{name}, bf16 only", bf16)


if __name__ == "__main__":
    main()
