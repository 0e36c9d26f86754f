#!/usr/bin/env python3
"""GEMMs inside the measured H200 schedules, against the profiles' standalone times.

Reads the 38 validation reports of 2026-11-29 (per-op measured starts and durations, one H200,
all-reduces emulated by a copy kernel on 16 CTAs) and the two profiles' GEMM tables. For each
GEMM it takes the profile's standalone time T at the chunk's row count (linear between the
profiled row counts) and the time it overlapped a copy on the comm stream. It prints:
  1. GEMMs that ran at least half their time beside a copy that had started first: the rate
     at which they progressed while beside it, (T - (measured - overlap)) / overlap, taking
     rate 1 outside the overlap; per model, GEMM and row count (median over instances).
  2. GEMMs that overlapped nothing: measured / T per model and GEMM, which should be 1.
  3. The rules of sim/contention.h against the rates of 1 (S = 132 SMs, P = 16 held by the
     copy): the median and mean |rate error| over the instances of each model, for the
     shipped rule (waves re-quantized over S - P, with and without the fitted x1.425 residual)
     and the extra-wave rule ((W + 1) / W, at least S / (S - P)), W from 256 x 256 tiles.
Measured numbers, and the rules' predictions of them; nothing here is fitted.
Usage: results/h200/inschedule_gemms.py  (from the repository root)
"""
import bisect
import collections
import glob
import json
import statistics

REPORTS = "results/h200/2026-11-29/validate-*.json"
PROFILES = [
    "configs/profiles/h200-llama3.1-8b-tp2.json",
    "configs/profiles/h200-llama2-70b-tp8.json",
]

tables = {}
for path in PROFILES:
    p = json.load(open(path))
    t = collections.defaultdict(list)
    for g in p["gemm"]:
        t[g["name"]].append((g["m"], g["median_us"]))
    tables[p["model"]] = {k: sorted(v) for k, v in t.items()}


def standalone_us(table, m):
    ms = [a for a, _ in table]
    i = bisect.bisect_left(ms, m)
    if i < len(ms) and ms[i] == m:
        return table[i][1]
    if i == 0:
        return table[0][1] * m / ms[0]
    if i == len(ms):
        return table[-1][1] * m / ms[-1]
    (m0, t0), (m1, t1) = table[i - 1], table[i]
    return t0 + (t1 - t0) * (m - m0) / (m1 - m0)


beside = collections.defaultdict(list)
alone = collections.defaultdict(list)
for path in sorted(glob.glob(REPORTS)):
    for case in json.load(open(path))["cases"]:
        strategy = case["strategy"]
        chunks = strategy.get("chunks") or [case["seq_len"]]
        table = tables[case["model"]]
        comms = [(o["measured_start_us"], o["measured_start_us"] + o["measured_us"])
                 for o in case["ops"] if o["stream"] == "comm"]
        for op in case["ops"]:
            if op["kind"] != "gemm":
                continue
            c = op["chunk"]
            rows = chunks[c] if 0 <= c < len(chunks) and strategy["name"] == "iso" else case["seq_len"]
            t = standalone_us(table[op["name"]], rows)
            s, d = op["measured_start_us"], op["measured_us"]
            overlap, first_before = 0.0, None
            for a, b in comms:
                x = min(s + d, b) - max(s, a)
                if x > 0:
                    overlap += x
                    if first_before is None:
                        first_before = a <= s
            if overlap == 0:
                alone[(case["model"], op["name"])].append(d / t)
            elif overlap >= 0.5 * d and first_before:
                beside[(case["model"], op["name"], rows)].append((t - (d - overlap)) / overlap)

print("1. rate while beside the copy on 16 CTAs (1 = unaffected), median over instances")
print(f"   {'model':<12} {'gemm':<8} {'rows':>5} {'n':>3} {'rate':>5}")
for k in sorted(beside):
    v = beside[k]
    print(f"   {k[0]:<12} {k[1]:<8} {k[2]:>5} {len(v):>3} {statistics.median(v):5.2f}")
print("\n2. GEMMs beside nothing: measured / profile standalone")
print(f"   {'model':<12} {'gemm':<8} {'n':>3} {'median':>7} {'min':>6} {'max':>6}")
for k in sorted(alone):
    v = alone[k]
    print(f"   {k[0]:<12} {k[1]:<8} {len(v):>3} {statistics.median(v):7.3f} {min(v):6.3f} {max(v):6.3f}")

# 3. The rules against the rates.
import math

SMS, TAKEN = 132, 16
SHAPES = {}  # the n of each GEMM, per model, from the profiles
for path in PROFILES:
    p = json.load(open(path))
    SHAPES[p["model"]] = {g["name"]: g["n"] for g in p["gemm"]}


def waves(rows, n, tile=256):
    return max(1.0, math.ceil(rows / tile) * math.ceil(n / tile) / SMS)


def requantize(w, extra):
    return math.ceil(w - 1e-9) / math.ceil(w * SMS / (SMS - TAKEN) - 1e-9) / (1 + extra)


def extra_wave(w):
    return 1 / max(1 + 1 / w, SMS / (SMS - TAKEN))


print("\n3. rules against the rates of 1: median / mean |rate error|")
for model in sorted(SHAPES):
    inst = [(g, rows, r) for (m, g, rows), v in beside.items() if m == model for r in v]
    for label, rule in (("re-quantized, x1.425 residual", lambda w: requantize(w, 0.425)),
                        ("re-quantized, no residual", lambda w: requantize(w, 0.0)),
                        ("extra wave", extra_wave)):
        e = [abs(rule(waves(rows, SHAPES[model][g])) - r) for g, rows, r in inst]
        print(f"   {model:<12} {label:<30} {statistics.median(e):.3f} / {statistics.mean(e):.3f}")
