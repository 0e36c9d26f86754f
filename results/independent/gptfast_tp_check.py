"""tpo's generation-scenario predictions against the ladder-residual paper's published runs at
TP 1, 2, 4 and 8: what the decode step costs without an all-reduce, how much of the gap is
attention tpo does not model, and the all-reduce at each TP.

Usage: python3 gptfast_tp_check.py TPO HARDWARE CSV [CSV ...]
  e.g. python3 results/independent/gptfast_tp_check.py build/cli/tpo h100x8 \
           results/independent/ladder-gptfast-h100-2024-11-14.csv \
           results/independent/ladder-gptfast-h100-tp-2024-11-14.csv

Rows are the published gpt-fast runs (model, tp, batch, model_name, prefill_s, decode_s, ...).
For each (model, TP) `tpo plan --scenario generate` predicts none and ladder (prompt 1024, 512
new tokens, --exec graph as their decode steps were CUDA-graph replays). Printed per batch:
- the decode step of the unmodified model (gpt_dense, tpo's none), published and predicted.
  At TP 1 there is no all-reduce, so this is the compute model alone;
- bounds on the attention traffic their code has and tpo does not model. Their decode attends
  over the whole allocated KV cache (1536 positions = prompt + new tokens, with a mask), through
  PyTorch's math SDPA path, after `repeat_interleave` of K and V to every query head
  (gpt_fast/utils.py, Attention.forward, of that repository). tpo reads each request's own
  context once (its decode steps average 1280 positions). Read once, the cache adds `low`; read
  once per query head (the expanded K and V streamed from HBM, plus fp32 scores written and read
  twice), it adds `high`; both at the hardware file's HBM bandwidth x its memory efficiency.
  Whether Inductor's kernels read the expanded tensors from HBM or from L2 is not known here, so
  this is a bracket, not a prediction;
  Growth from batch 4 to 16 and 64 is checked against tpo's growth plus the bracket's growth:
  what does not depend on the batch cancels, and from batch 2 on their linear layers are cuBLAS
  GEMMs (at batch 1, Inductor's GEMV: its `mm` decomposition for one row under
  `coordinate_descent_tuning`, which their benchmark.py sets), so batch 1 -> 4 is printed apart;
- for TP > 1: the decode time ladder saved per all-reduce, read off the published times (a
  lower bound on one all-reduce in that stack: ladder hides at most an all-reduce's own time),
  beside tpo's predicted saving and the all-reduce tpo charges for that message (`tpo simulate
  --phase decode`, the op's time in the trace).
- what their code runs and tpo does not (what-if, not shipped): their LM head and embedding are
  not sharded (the logs' module trees print `(output): Linear(in_features=4096,
  out_features=128256)` at every TP, and the layers' shapes shrink with TP), so every GPU reads
  the whole LM head each step; tpo divides it by TP. The batch-1 decode steps again with
  `--vocab replicated` (each GPU runs the whole embedding and LM head, with no all-reduce after
  the embedding and no logits gather; until 2026-12-04 a model copy whose vocab_size was
  multiplied by TP, which still charged the embedding's all-reduce);
- a sensitivity (what-if, not shipped): the batch-1 decode steps again with the hardware file
  given h200x8.json's GEMM terms (gemm_max, gemm_tiles, gemm_stream_k, gemm_overhead_us, fitted
  on our H200 profile; same GH100 compute), where the file has no gemm_overhead_us of its own.
Predictions and arithmetic only: nothing here is measured by us, and no file is changed."""
import json
import os
import sys
import tempfile

from ladder_gptfast_check import DECODE_STEPS, STRATEGY, err
from ladder_gptfast_check import predict as ladder_predict
from tpo_predict import config_file, read_csv, summary, trace_event

PROMPT, NEW_TOKENS = 1024, 512
CACHE = (PROMPT + NEW_TOKENS + 7) // 8 * 8  # gpt-fast's setup_caches: find_multiple(.., 8)
CONTEXT_MEAN = PROMPT + NEW_TOKENS // 2  # tpo's decode steps: contexts 1025 .. 1535
FP16 = 2
# Growth is read from batch 4: at batch 1 their linear layers are Inductor's GEMV kernels (its
# mm decomposition when one side has one row, under coordinate_descent_tuning, which their
# benchmark.py sets), from batch 2 on cuBLAS GEMMs.
REF_BATCH = 4


def predict(tpo, hardware, model, tp, batches, extra=()):
    """{(batch, strategy): result} of `tpo plan --scenario generate` at this TP (none, ladder)."""
    return ladder_predict(tpo, hardware, model, batches, tp=tp, strategies="ladder",
                          extra=extra)[0]


def allreduce_us(tpo, hardware, model, tp, batch):
    """The time tpo charges one decode all-reduce (batch x hidden fp16) at this TP, in us."""
    return trace_event(tpo, ["--model", model, "--hardware", hardware, "--tp", str(tp), "--phase",
                             "decode", "--batch", str(batch), "--context", str(CONTEXT_MEAN),
                             "--layers", "1", "--strategy", "none"], "allreduce")["dur"]


def model_file(model):
    with open(config_file("models", model)) as f:
        return json.load(f)


def attention_bounds_ms(m, tp, batch, hw):
    """(low, high): decode-step time, ms, of the attention traffic their code has beyond what
    tpo counts, at HBM bandwidth x memory efficiency (see the module's docstring)."""
    heads, kv_heads = m["num_attention_heads"], m["num_key_value_heads"]
    head_dim = m.get("head_dim") or m["hidden_size"] // heads
    layers = m["num_hidden_layers"]
    kv_gpu = kv_heads // tp
    per_position = batch * kv_gpu * head_dim * FP16 * 2 * layers  # K and V
    counted = per_position * CONTEXT_MEAN
    once = per_position * CACHE
    expanded = once * (heads // kv_heads)
    scores = batch * (heads // tp) * CACHE * 4 * 4 * layers  # fp32, written and read twice
    gbps = hw["gpu"]["memory_bandwidth_gbps"] * hw["efficiency"]["memory"]
    to_ms = 1e-6 / gbps  # bytes -> ms at gbps GB/s
    return (once - counted) * to_ms, (expanded + scores - counted) * to_ms


GEMM_TERMS = ("gemm_max", "gemm_tiles", "gemm_stream_k", "gemm_overhead_us")


def gemm_what_if(tpo, hw, groups, rows):
    """Batch-1 decode step errors with h200x8's fitted GEMM terms in a copy of `hw`."""
    with open(config_file("hardware", "h200x8")) as f:
        donor = json.load(f)["efficiency"]
    what_if = json.loads(json.dumps(hw))
    for k in GEMM_TERMS:
        what_if["efficiency"][k] = donor[k]
    cells = []
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "what-if.json")
        with open(path, "w") as f:
            json.dump(what_if, f)
        for model, tp in groups:
            one = [r for r in rows if r["model"] == model and int(r["tp"]) == tp
                   and int(r["batch"]) == 1 and STRATEGY[r["model_name"]] == "none"]
            if not one:
                continue
            pred = predict(tpo, path, model, tp, [1])[(1, "none")]["decode_step_us"] / 1e3
            cells.append(f"{model} TP {tp} "
                         f"{err(pred, float(one[0]['decode_s']) / DECODE_STEPS * 1e3):+.1%}")
    print("Sensitivity (what-if, not shipped), decode step at batch 1 with h200x8's GEMM terms ("
          + ", ".join(f"{k} {json.dumps(donor[k])}" for k in GEMM_TERMS) + "): " + ", ".join(cells))


def lm_head_what_if(tpo, hardware, groups, rows):
    """Batch-1 decode step errors, and every ladder speedup, with the LM head unsharded, as
    their code runs it."""
    cells, speedups = [], []
    for model, tp in groups:
        if tp == 1:
            continue
        mine = [r for r in rows if r["model"] == model and int(r["tp"]) == tp]
        pub = {(int(r["batch"]), STRATEGY[r["model_name"]]): r for r in mine}
        m = model_file(model)
        batches = sorted({b for b, _ in pub})
        pred = predict(tpo, hardware, model, tp, batches, extra=["--vocab", "replicated"])
        if (1, "none") in pub:
            step = pred[(1, "none")]["decode_step_us"] / 1e3
            step_pub = float(pub[(1, "none")]["decode_s"]) / DECODE_STEPS * 1e3
            gap = (step_pub - step) * 1e3 / m["num_hidden_layers"]
            cells.append(f"{model} TP {tp} {err(step, step_pub):+.1%} ({gap:+.1f} us)")
        speedups.extend(pred[(b, "ladder")]["speedup"]
                        / (float(pub[(b, "ladder")]["tokens_per_s"])
                           / float(pub[(b, "none")]["tokens_per_s"])) - 1
                        for b in batches if (b, "ladder") in pub and (b, "none") in pub)
    print("What their code runs (--vocab replicated): decode step at batch 1 with the embedding "
          "and LM head unsharded, err and (published - predicted) per layer: " + ", ".join(cells))
    print(f"  and the ladder speedup, predicted / published - 1, all {len(speedups)} points at "
          f"TP > 1, with it: " + summary(speedups))


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    tpo, hardware = sys.argv[1], sys.argv[2]
    rows = [r for path in sys.argv[3:] for r in read_csv(path)]
    with open(config_file("hardware", hardware)) as f:
        hw = json.load(f)
    print(f"tpo plan --scenario generate on {hardware} (prompt {PROMPT} + {NEW_TOKENS} new "
          f"tokens, --exec graph) against the published gpt-fast runs; err = predicted / "
          f"published - 1")
    print(f"attention not modelled (their decode reads a {CACHE}-position cache, K and V "
          f"repeated per query head): pred+low .. pred+high, at "
          f"{hw['gpu']['memory_bandwidth_gbps'] * hw['efficiency']['memory']:g} GB/s\n")
    groups = sorted({(r["model"], int(r["tp"])) for r in rows},
                    key=lambda g: ([r["model"] for r in rows].index(g[0]), g[1]))
    batch1, growth, jump, speedups = [], [], [], []
    for model, tp in groups:
        mine = [r for r in rows if r["model"] == model and int(r["tp"]) == tp]
        pub = {(int(r["batch"]), STRATEGY[r["model_name"]]): r for r in mine}
        if len(pub) != len(mine):
            sys.exit(f"{model} TP {tp}: the CSVs repeat a (batch, model_name) row")
        batches = sorted({b for b, _ in pub})
        pred = predict(tpo, hardware, model, tp, batches)
        m = model_file(model)
        layers = m["num_hidden_layers"]
        print(f"{model}, TP {tp} ({layers} layers)")
        print(f"{'batch':>5} {'none decode step ms pub / pred':>31} {'err':>7} "
              f"{'growth from batch 4 ms pub / pred':>34} {'pred + bracket':>16} {'inside':>6}"
              + (f" {'saved per all-reduce us pub (>=) / pred':>40} {'tpo all-reduce us':>17}"
                 if tp > 1 else ""))
        ref = pub.get((REF_BATCH, "none"))
        for b in batches:
            base = pub.get((b, "none"))
            if base is None:
                continue
            dec_pub = float(base["decode_s"]) / DECODE_STEPS * 1e3
            dec_pred = pred[(b, "none")]["decode_step_us"] / 1e3
            line = f"{b:>5} {dec_pub:>14.3f} / {dec_pred:<14.3f} {err(dec_pred, dec_pub):>+7.1%} "
            if b == 1:
                batch1.append((model, tp, err(dec_pred, dec_pub),
                               (dec_pub - dec_pred) * 1e3 / layers))
            if b <= REF_BATCH or ref is None:
                line += f"{'':>34} {'':>16} {'':>6}"
            else:
                # Growth from batch 4: what does not depend on the batch (kernel floors, the
                # all-reduce's latency) cancels, and both batches run cuBLAS GEMMs; attention
                # over the cache does not cancel.
                lo1, hi1 = attention_bounds_ms(m, tp, REF_BATCH, hw)
                lo, hi = attention_bounds_ms(m, tp, b, hw)
                g_pub = dec_pub - float(ref["decode_s"]) / DECODE_STEPS * 1e3
                g_pred = dec_pred - pred[(REF_BATCH, "none")]["decode_step_us"] / 1e3
                ok = g_pred + lo - lo1 <= g_pub <= g_pred + hi - hi1
                growth.append((model, tp, b, g_pub, g_pred, g_pred + lo - lo1, g_pred + hi - hi1))
                line += (f"{g_pub:>15.3f} / {g_pred:<16.3f} "
                         f"{g_pred + lo - lo1:>6.2f}..{g_pred + hi - hi1:<6.2f}  "
                         f"{'yes' if ok else 'no':>6}")
            if b == REF_BATCH and (1, "none") in pub:
                jump.append((model, tp, dec_pub - float(pub[(1, "none")]["decode_s"])
                             / DECODE_STEPS * 1e3, dec_pred - pred[(1, "none")]["decode_step_us"]
                             / 1e3))
            if tp > 1:
                lad = pub.get((b, "ladder"))
                ar = allreduce_us(tpo, hardware, model, tp, b)
                saved_pred = (pred[(b, "none")]["decode_step_us"]
                              - pred[(b, "ladder")]["decode_step_us"]) / (2 * layers)
                if lad is not None:
                    saved_pub = (float(base["decode_s"]) - float(lad["decode_s"])) \
                        / DECODE_STEPS / (2 * layers) * 1e6
                    line += f" {saved_pub:>25.1f} / {saved_pred:<12.1f} {ar:>17.1f}"
                else:
                    line += f" {'(ladder not published)':>25} / {saved_pred:<12.1f} {ar:>17.1f}"
            print(line)
        if tp > 1:
            pairs = [(b, float(pub[(b, "ladder")]["tokens_per_s"])
                      / float(pub[(b, "none")]["tokens_per_s"]), pred[(b, "ladder")]["speedup"])
                     for b in batches if (b, "ladder") in pub and (b, "none") in pub]
            speedups.extend(sq / sp - 1 for _, sp, sq in pairs)
            print("ladder speedup (tokens/s), published / predicted: "
                  + ", ".join(f"bs {b} {sp:.3f}x / {sq:.3f}x" for b, sp, sq in pairs))
        print()

    print("Decode step at batch 1, err and (published - predicted) per layer: "
          + ", ".join(f"{m} TP {tp} {e:+.1%} ({gap:+.1f} us)" for m, tp, e, gap in batch1))
    print(f"Ladder speedup, predicted / published - 1, all {len(speedups)} points at TP > 1: "
          + summary(speedups))
    print("Batch 1 -> 4, decode step growth, published / predicted (ms): " + ", ".join(
        f"{m} TP {tp} {gp:.2f} / {gq:.2f}" for m, tp, gp, gq in jump))
    inside = [g for g in growth if g[5] <= g[3] <= g[6]]
    print(f"Growth from batch 4 inside tpo's growth + the attention bracket: {len(inside)} of "
          f"{len(growth)}")
    for m, tp, b, g_pub, g_pred, lo, hi in growth:
        if not lo <= g_pub <= hi:
            where = "above" if g_pub > hi else "below"
            print(f"  {m} TP {tp} bs {b}: {g_pub:.3f} ms, {where} {lo:.3f} .. {hi:.3f}")
    lm_head_what_if(tpo, hardware, groups, rows)
    if "gemm_overhead_us" not in hw["efficiency"]:
        gemm_what_if(tpo, hw, groups, rows)

if __name__ == "__main__":
    main()
