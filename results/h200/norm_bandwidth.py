#!/usr/bin/env python3
"""Effective bandwidth of the H200 norms and elementwise ops, from the committed profiles.

Reads the measured medians of rmsnorm, silu_mul and residual_add (tpo profile, 2026-11-29),
takes off the measured per-kernel GPU term (2.1 us, configs/hardware/h200x8.json), and
divides the bytes each op moves (the formulas of sim/op_work.cc) by what is left. Prints
the bandwidth in the L2 regime (bytes <= 25 MiB, the model's l2_resident_mib) and beyond.
Measured numbers only; nothing here is fitted.
Usage: results/h200/norm_bandwidth.py  (from the repository root)
"""
import json
import statistics

KERNEL_US = 2.1
L2_BYTES = 25 * 1048576
PROFILES = [
    "configs/profiles/h200-llama3.1-8b-tp2.json",
    "configs/profiles/h200-llama2-70b-tp8.json",
]


def op_bytes(op, rows, width):
    if op == "rmsnorm":  # read x, write y, read the weight vector
        return 2.0 * (2.0 * rows * width + width)
    return 6.0 * rows * width  # residual_add, silu_mul: read two, write one


for path in PROFILES:
    p = json.load(open(path))
    print(f"{path}")
    print(f"  {'op':<13} {'rows':>5} {'cols':>5} {'MB':>7} {'us':>7} {'GB/s':>7}  regime")
    by = {}
    for r in p["rowwise"]:
        op, rows, width, us = r["name"], r["rows"], r["cols"], r["median_us"]
        b = op_bytes(op, rows, width)
        gbps = b / ((us - KERNEL_US) * 1e3)
        regime = "L2" if b <= L2_BYTES else "HBM"
        if regime == "HBM" or rows >= 256:
            by.setdefault((op, regime), []).append(gbps)
        print(f"  {op:<13} {rows:>5} {width:>5} {b / 1e6:>7.1f} {us:>7.2f} {gbps:>7.0f}  {regime}")
    print("  median GB/s by op and regime (rows >= 256 in L2, to leave the latency-bound sizes out):")
    for (op, regime), v in sorted(by.items()):
        print(f"    {op:<13} {regime:<3} {statistics.median(v):>7.0f}  ({len(v)} sizes)")
