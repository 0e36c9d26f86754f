#!/usr/bin/env python3
"""Compares tpo's analytical RMSNorm (its `attn_norm` op) with the published H200 times in a CSV
(h200-tileops-rmsnorm-2026-09-06.csv: published by TileOPs' nightly benchmark, not measured by tpo).
Each case is the attention norm of a one-layer synthetic model at TP 1 (prefill of 2048 tokens, or
one decode token), read from the Chrome trace of `tpo simulate --strategy none` (it includes the
per-kernel term, `kernel_overhead_us`).

usage: tileops_norm_check.py TPO HARDWARE CSV
"""
import sys

from tpo_predict import check_args, predict_op, summary

IMPLEMENTATIONS = ("flashinfer", "vllm", "torch_compile")


def predict(tpo, hardware, rows, hidden):
    model = {"name": f"norm-{hidden}", "hidden_size": hidden, "num_attention_heads": hidden // 128,
             "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 3 * hidden,
             "source": "synthetic: one RMSNorm of the given rows"}
    phase = ["--seq", str(rows)] if rows > 1 else ["--phase", "decode", "--seq", "2048"]
    e = predict_op(tpo, hardware, model, phase, "attn_norm")
    if e["args"]["tokens"] != rows:
        sys.exit(f"attn_norm has {e['args']['tokens']} rows, expected {rows}")
    return e["dur"]


def main():
    tpo, hardware, rows = check_args(__doc__)
    head = "".join(f" {name + ' us':>16} {'error':>7}" for name in IMPLEMENTATIONS)
    print(f"{'label':20} {'rows x hidden':>14} {'predicted us':>12}{head}")
    errors = {name: {"prefill": [], "decode": []} for name in IMPLEMENTATIONS}
    for r in rows:
        m, n = int(r["rows"]), int(r["hidden"])
        us = predict(tpo, hardware, m, n)
        line = f"{r['label']:20} {f'{m} x {n}':>14} {us:12.2f}"
        for name in IMPLEMENTATIONS:
            if not r[name + "_ms"]:
                line += f" {'-':>16} {'-':>7}"
                continue
            pub = float(r[name + "_ms"]) * 1e3
            err = us / pub - 1
            errors[name]["prefill" if m > 1 else "decode"].append(err)
            line += f" {pub:16.2f} {err:+7.1%}"
        print(line)
    print()
    for name in IMPLEMENTATIONS:
        for phase, errs in errors[name].items():
            if errs:
                print(f"{name:14} {phase:8} n={len(errs)}  {summary(errs)}")


if __name__ == "__main__":
    main()
