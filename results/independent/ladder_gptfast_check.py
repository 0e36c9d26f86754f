"""tpo's generation-scenario predictions against the ladder-residual paper's own published runs.

Usage: python3 ladder_gptfast_check.py TPO HARDWARE CSV
  e.g. python3 results/independent/ladder_gptfast_check.py build/cli/tpo h100x8 \
           results/independent/ladder-gptfast-h100-2024-11-14.csv

For each (model, batch) in the CSV, `tpo plan --scenario generate` predicts prefill time, decode
step time and tokens/s of none, ladder and parallel-block (prompt 1024, 512 new tokens, TP 8,
--exec graph: their decode steps were CUDA-graph replays). Printed beside the published numbers:
- the absolute times and tokens/s, and each strategy's speedup over none;
- two quantities read off the published decode times without any model:
  * per all-reduce, the decode time ladder saved: (dense - ladder) / (511 steps x 2 x layers).
    Ladder can hide at most an all-reduce's own time, so this is a lower bound on what one
    all-reduce cost in that stack;
  * ladder's decode time per layer: an upper bound on one layer's compute there (it still
    includes whatever communication ladder left exposed);
- a sensitivity (a what-if, not a shipped setting): the same predictions with the all-reduce
  charged as latency + bandwidth at several latencies instead of the file's published table.
Predictions only: nothing here is measured by us, and no hardware file is changed."""
import copy
import json
import os
import sys
import tempfile

from tpo_predict import check_args, config_file, run_tpo, summary

STRATEGY = {"gpt_dense": "none", "gpt_ladder": "ladder", "gpt_parallel": "parallel-block"}
DECODE_STEPS = 511  # gpt-fast: the first of the 512 new tokens comes from prefill


def predict(tpo, hardware, model, batches, tp=8, strategies="ladder,parallel-block", extra=()):
    """{(batch, strategy): result} of `tpo plan --scenario generate` (with `extra` options), and
    the model's layers."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "g.json")
        run_tpo([tpo, "plan", "--scenario", "generate", "--model", model, "--hardware", hardware,
                 "--tp", str(tp), "--prompt", "1024", "--new-tokens", "512", "--batch",
                 ",".join(map(str, batches)), "--strategies", strategies, "--exec", "graph",
                 "--json", out] + list(extra))
        g = json.load(open(out))
    results = {(b["batch"], r["strategy"]): r for b in g["batches"] for r in b["results"]}
    return results, g["num_layers"]


def err(pred, pub):
    return pred / pub - 1.0


def main():
    tpo, hardware, rows = check_args(__doc__)
    models = sorted({r["model"] for r in rows}, key=lambda m: [r["model"] for r in rows].index(m))
    print(f"tpo plan --scenario generate on {hardware} (TP 8, prompt 1024 + 512 new tokens, "
          f"--exec graph) against the published gpt-fast runs; error = predicted / published - 1\n")
    decode_errors, speedup_errors = [], []
    derived = []
    for model in models:
        mine = [r for r in rows if r["model"] == model]
        batches = sorted({int(r["batch"]) for r in mine})
        pred, layers = predict(tpo, hardware, model, batches)
        pub = {(int(r["batch"]), STRATEGY[r["model_name"]]): r for r in mine}
        if len(pub) != len(mine):
            sys.exit(f"{model}: the CSV repeats a (batch, model_name) row")
        print(f"{model} ({layers} layers)")
        print(f"{'batch':>5} {'strategy':<15} {'prefill ms pub/pred':>21} {'err':>7} "
              f"{'decode step ms pub/pred':>25} {'err':>7} {'tokens/s pub/pred':>20} {'err':>7} "
              f"{'speedup pub/pred':>17}")
        for b in batches:
            base = pub.get((b, "none"))
            for s in ("none", "ladder", "parallel-block"):
                p = pub.get((b, s))
                if p is None:
                    print(f"{b:>5} {s:<15} (not published)")
                    continue
                q = pred[(b, s)]
                pre_pub, pre_pred = float(p["prefill_s"]) * 1e3, q["prefill_us"] / 1e3
                dec_pub = float(p["decode_s"]) / DECODE_STEPS * 1e3
                dec_pred = q["decode_step_us"] / 1e3
                tok_pub, tok_pred = float(p["tokens_per_s"]), q["tokens_per_s"]
                sp_pub = tok_pub / float(base["tokens_per_s"]) if base else float("nan")
                sp_pred = q["speedup"]
                decode_errors.append(err(dec_pred, dec_pub))
                if s != "none" and base:
                    speedup_errors.append((model, b, s, sp_pub, sp_pred))
                print(f"{b:>5} {s:<15} {pre_pub:>10.1f} /{pre_pred:>9.1f} {err(pre_pred, pre_pub):>+7.1%} "
                      f"{dec_pub:>12.3f} /{dec_pred:>11.3f} {err(dec_pred, dec_pub):>+7.1%} "
                      f"{tok_pub:>9.1f} /{tok_pred:>9.1f} {err(tok_pred, tok_pub):>+7.1%} "
                      f"{sp_pub:>7.3f}x /{sp_pred:>6.3f}x")
            if (b, "ladder") in pub and base:
                saved_pub = (float(base["decode_s"]) - float(pub[(b, "ladder")]["decode_s"])) \
                    / DECODE_STEPS / (2 * layers) * 1e6
                saved_pred = (pred[(b, "none")]["decode_step_us"]
                              - pred[(b, "ladder")]["decode_step_us"]) / (2 * layers)
                layer_pub = float(pub[(b, "ladder")]["decode_s"]) / DECODE_STEPS / layers * 1e6
                layer_pred = pred[(b, "ladder")]["decode_step_us"] / layers
                pre_saved_pub = (float(base["prefill_s"]) - float(pub[(b, "ladder")]["prefill_s"])) * 1e3
                pre_saved_pred = (pred[(b, "none")]["prefill_us"] - pred[(b, "ladder")]["prefill_us"]) / 1e3
                derived.append((model, b, saved_pub, saved_pred, layer_pub, layer_pred,
                                pre_saved_pub, pre_saved_pred))
        print()

    print(f"Decode step time, all {len(decode_errors)} rows: " + summary(decode_errors))
    print("Speedup over none (predicted / published - 1): "
          + ", ".join(f"{m} bs {b} {s} {pr / pu - 1:+.1%}" for m, b, s, pu, pr in speedup_errors))
    print()
    print("Read off the published times (no model), beside tpo's prediction of the same:")
    print(f"{'model':<12} {'batch':>5} {'decode time ladder saved per all-reduce, us':>44} "
          f"{'ladder decode time per layer, us':>34} {'prefill time ladder saved, ms':>31}")
    print(f"{'':<12} {'':>5} {'published (>= one all-reduce) / predicted':>44} "
          f"{'published (>= compute) / predicted':>34} {'published / predicted':>31}")
    for model, b, sp, sq, lp, lq, pp, pq in derived:
        print(f"{model:<12} {b:>5} {sp:>27.1f} / {sq:<14.1f} {lp:>20.1f} / {lq:<11.1f} "
              f"{pp:>20.1f} / {pq:<8.1f}")
    print()

    with open(config_file("hardware", hardware)) as f:
        hw = json.load(f)
    link = hw["node"]["link"]
    shipped = link["allreduce_latency_us"]
    table = link.get("allreduce_table")
    print(f"Sensitivity (what-if, not shipped): batch-1 ladder speedup with the all-reduce charged as "
          f"latency + bandwidth ({link['busbw_gbps']:g} GB/s) at these latencies"
          + (" instead of the file's published allreduce_table" if table else
             f" ({shipped:g} us shipped)"))
    print(f"{'latency us':>10} " + " ".join(f"{m + ' pred':>18}" for m in models))
    latencies = sorted({shipped, 12.0, 16.0, 20.0, 24.0})
    rows = [("table", None)] if table else []
    rows += [(f"{lat:g}", lat) for lat in latencies]
    for label, lat in rows:
        what_if = copy.deepcopy(hw)
        if lat is not None:
            what_if["node"]["link"].pop("allreduce_table", None)
            what_if["node"]["link"]["allreduce_latency_us"] = lat
        cells = []
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "what-if.json")
            with open(path, "w") as f:
                json.dump(what_if, f)
            for model in models:
                pred, _ = predict(tpo, path, model, [1])
                cells.append(f"{pred[(1, 'ladder')]['speedup']:>17.3f}x")
        print(f"{label:>10} " + " ".join(cells))
    print(" published: " + ", ".join(
        f"{m} {pu:.3f}x" for m, b, s, pu, pr in speedup_errors if b == 1 and s == "ladder"))


if __name__ == "__main__":
    main()
