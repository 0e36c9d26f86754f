#!/usr/bin/env bash
# Predicts single bf16 GEMMs (M x N x K) with tpo's analytical model, for comparison with
# published measurements (README.md here). Each GEMM is the down projection of a one-layer
# synthetic model at TP 1 (hidden N, intermediate K, prompt M), read from the Chrome trace of
# `tpo simulate --strategy none` (ops run alone there, so the trace holds standalone times).
# usage: results/independent/gemm_check.sh TPO HARDWARE "M N K" ["M N K" ...]
set -euo pipefail
tpo=$1 hw=$2
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for shape in "$@"; do
  read -r m n k <<<"$shape"
  cat >"$tmp/model.json" <<J
{"schema": "tpo.model/1", "name": "gemm-$n-$k", "num_hidden_layers": 1, "hidden_size": $n,
 "num_attention_heads": $((n / 128)), "num_key_value_heads": $((n / 128)), "head_dim": 128,
 "intermediate_size": $k, "vocab_size": 32000,
 "source": "synthetic: its down projection is one $m x $n x $k GEMM"}
J
  "$tpo" simulate --model "$tmp/model.json" --hardware "$hw" --tp 1 --seq "$m" --strategy none \
    --trace "$tmp/t.json" >/dev/null
  python3 - "$tmp/t.json" "$m" "$n" "$k" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
ev = t["traceEvents"] if isinstance(t, dict) else t
m, n, k = (int(x) for x in sys.argv[2:5])
d = next(e for e in ev if e.get("ph") == "X" and e.get("name") == "down")
assert d["args"]["mnk"] == f"{m}x{n}x{k}", d["args"]["mnk"]
us = d["dur"]
print(f"{m}x{n}x{k}  predicted {us:11.3f} us  {2 * m * n * k / us / 1e6:6.1f} TFLOP/s")
PY
done
