#!/usr/bin/env python3
"""Compares tpo's analytical GEMM predictions with the published H200 timings in a CSV
(h200-tileops-nightly-2026-09-06.csv: published by TileOPs' nightly benchmark, not measured
by tpo). Each GEMM is the down projection (M x N x K) of a synthetic one-layer model (hidden N,
intermediate K, prompt M), as gemm_check.sh makes it; the prediction includes the hardware
file's per-GEMM term (`gemm_overhead_us`). "cublas kernels" is how many kernels the published
torch-cublas call ran.

usage: tileops_check.py TPO HARDWARE CSV
"""
import sys

from tpo_predict import check_args, predict_op, summary


def predict_gemm(tpo, hardware, m, n, k):
    model = {"name": f"gemm-{n}-{k}", "hidden_size": n, "num_attention_heads": n // 128,
             "num_key_value_heads": n // 128, "head_dim": 128, "intermediate_size": k,
             "source": f"synthetic: its down projection is one {m} x {n} x {k} GEMM"}
    e = predict_op(tpo, hardware, model, ["--seq", str(m)], "down")
    if e["args"]["mnk"] != f"{m}x{n}x{k}":
        sys.exit(f"the down projection is {e['args']['mnk']}, not {m}x{n}x{k}")
    return e["dur"]


def main():
    tpo, hardware, rows = check_args(__doc__)
    print(f"{'label':26} {'M x N x K':>18} {'dtype':5} {'published us':>12} {'cublas kernels':>14} "
          f"{'predicted us':>12} {'error':>7} {'vs cublaslt-best':>16}")
    groups = {"2048-16k rows": [], "thin (M <= 128)": [], "other": []}
    for r in rows:
        m, n, k = int(r["m"]), int(r["n"]), int(r["k"])
        pub = float(r["torch_cublas_ms"]) * 1e3
        best = float(r["cublaslt_best_ms"]) * 1e3
        pred = predict_gemm(tpo, hardware, m, n, k)
        err, err_best = pred / pub - 1, pred / best - 1
        group = "2048-16k rows" if 2048 <= m <= 16384 else "thin (M <= 128)" if m <= 128 else "other"
        groups[group].append((err, err_best, r["dtype"]))
        print(f"{r['label']:26} {f'{m}x{n}x{k}':>18} {r['dtype']:5} {pub:12.1f} "
              f"{r['torch_cublas_kernels']:>14} {pred:12.1f} {err:+7.1%} {err_best:+16.1%}")
    print()
    for name, errs in groups.items():
        if not errs:
            continue
        subsets = [(name, errs)]
        bf16 = [e for e in errs if e[2] == "bf16"]
        if 0 < len(bf16) < len(errs):
            subsets.append((f"{name}, bf16 only", bf16))
        for label, es in subsets:
            print(f"{label:22} n={len(es):2}  vs torch-cublas: {summary([e for e, _, _ in es])};  "
                  f"vs cublaslt-best: {summary([b for _, b, _ in es])}")


if __name__ == "__main__":
    main()
