#!/usr/bin/env python3
"""Compares tpo's analytical attention (a fused kernel's efficiency curve) with the published H200
FlashAttention-3 times in a CSV (h200-tileops-attention-2026-09-06.csv: published by TileOPs' nightly
benchmark, not measured by tpo). Each case is the attention op of a one-layer synthetic model at TP 1,
read from the Chrome trace of `tpo simulate --strategy none` (it includes the per-kernel term,
`kernel_overhead_us`).
The script stops if tpo's FLOP count for a case differs from the published one by more than one part
in a million (a wrong shape).

usage: tileops_attention_check.py TPO HARDWARE CSV
"""
import sys

from tpo_predict import check_args, predict_op, summary


def predict(tpo, hardware, heads, kv_heads, requests, tokens, prefix):
    model = {"name": f"attention-{heads}-{kv_heads}", "hidden_size": heads * 128,
             "num_attention_heads": heads, "num_key_value_heads": kv_heads, "head_dim": 128,
             "intermediate_size": 4 * heads * 128,
             "source": "synthetic: one attention op of the given heads"}
    e = predict_op(tpo, hardware, model, ["--seq", str(tokens), "--context", str(prefix),
                                          "--batch", str(requests)], "attention")
    return e["dur"], e["args"]["flops"]


def main():
    tpo, hardware, rows = check_args(__doc__)
    print(f"{'label':20} {'dtype':5} {'heads':>5} {'req x tokens':>12} {'prefix':>6} "
          f"{'published us':>12} {'TFLOP/s':>7} {'predicted us':>12} {'TFLOP/s':>7} {'error':>7}")
    errors = []
    for r in rows:
        n = {k: int(r[k]) for k in ("heads", "kv_heads", "requests", "tokens", "prefix")}
        us, flops = predict(tpo, hardware, n["heads"], n["kv_heads"], n["requests"],
                            n["tokens"], n["prefix"])
        if abs(flops - float(r["flops"])) > 1e-6 * flops:
            sys.exit(f"{r['label']}: tpo counts {flops:.0f} FLOPs, the source {r['flops']}: "
                     "the shape in the CSV is not the benchmarked one")
        pub = float(r["fa3_ms"]) * 1e3
        err = us / pub - 1
        errors.append(err)
        print(f"{r['label']:20} {r['dtype']:5} {n['heads']:5} "
              f"{str(n['requests']) + ' x ' + str(n['tokens']):>12} {n['prefix']:6} {pub:12.1f} "
              f"{flops / pub / 1e6:7.0f} {us:12.1f} {flops / us / 1e6:7.0f} {err:+7.1%}")
    print(f"\nn={len(errors)}  {summary(errors)}")


if __name__ == "__main__":
    main()
