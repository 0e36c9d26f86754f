#!/usr/bin/env python3
"""The fused-attention efficiency curve of the Hopper hardware files (attention_max,
attention_kv_half), fitted to a published kernel benchmark; prints the fit and its errors, the
leave-one-out ones included. Usage: python3 results/independent/attention_curve_fit.py

Data: FlashAttention-3 paper (arXiv 2407.08608), Figure 5, forward, causal, head dim 128, bf16
on H100 SXM5; batch x length = 16k tokens, 16 heads. TFLOP/s at 512 ... 16k tokens. Read as
the causal panel because it is the lower of the two head-dim-128 panels at short lengths.
Model (sim/analytical_cost.cc): peak x attention_max x kv / (kv + attention_kv_half) x the
share of the last wave of 128-query blocks that is filled, kv = the average keys per query
block (half the length without a prefix)."""
import math

PEAK = 989.4  # H100 SXM dense bf16, TFLOP/s (configs/hardware/h100x8.json)
SMS = 132
LENGTHS = [512, 1024, 2048, 4096, 8192, 16384]
KERNELS = {
    "cuDNN (shipped: the fused kernel tpo's CUDA runtime runs)": [315, 410, 484, 518, 529, 539],
    "FlashAttention-3": [292, 423, 521, 579, 602, 616],
}


def fill(length):
    blocks = (16384 // length) * 16 * math.ceil(length / 128)
    waves = math.ceil(blocks / SMS)
    return blocks / (waves * SMS)


def predict(emax, half, length):
    kv = length / 2
    return PEAK * emax * kv / (kv + half) * fill(length)


def fit(points):
    best = None
    for e in range(450, 700, 2):
        for half in range(20, 800, 2):
            err = sum(math.log(predict(e / 1000, half, n) / t) ** 2 for n, t in points)
            if best is None or err < best[0]:
                best = (err, e / 1000, half)
    return best[1], best[2]


for name, tflops in KERNELS.items():
    points = list(zip(LENGTHS, tflops))
    emax, half = fit(points)
    print(f"{name}: attention_max {emax}, attention_kv_half {half}")
    for n, t in points:
        print(f"  {n:6d} tokens: published {t} TFLOP/s, fitted {predict(emax, half, n):6.1f} "
              f"({predict(emax, half, n) / t - 1:+.1%})")
    loo = []
    for i, (n, t) in enumerate(points):
        e2, h2 = fit(points[:i] + points[i + 1:])
        loo.append(predict(e2, h2, n) / t - 1)
    print("  each point left out of the fit in turn: " + ", ".join(f"{x:+.1%}" for x in loo))
