"""tpo's prefill predictions on H100 against TokenWeave's published vLLM runs: compute alone, the
all-reduce, the time communication adds, and how much of it overlap removes.

Usage: python3 tokenweave_check.py TPO PREFILL_CSV ALLREDUCE_CSV [HARDWARE] [--sm-clock MHZ]
                                   [--iso-allreduce-fusion]
  e.g. python3 results/independent/tokenweave_check.py build/cli/tpo \
           results/independent/tokenweave-h100-prefill.csv \
           results/independent/tokenweave-h100-allreduce.csv

Every prediction is `tpo` on a copy of configs/hardware/h100x8.json (or HARDWARE, e.g. a what-if
file; unchanged otherwise), with
--exec eager (their vLLM ran --enforce-eager):
- "no comm": every all-reduce priced at zero (no table, no latency, no bandwidth limit), against
  their `no_ar` run (all-reduces removed): the compute model alone;
- "multimem": at TP 8 the all-reduce read from their published multimem times (8 ranks) at the
  CTA count their baseline ran with, 8 (artifact/llama_src_files/pl_baseline_multimem.py reads
  MAX_CTAS_ATTN and MAX_CTAS_MLP from the environment, default 8, and figure_2_11/run.sh sets
  neither; until 2026-12-03 this check used 16 up to 4096 tokens and 32 above, the
  baseline_ctas of prefill_configs/llama_config_8.json, which no model file reads; at these
  sizes the columns differ by at most 1%), imported as a user would
  import their stack's times (`tpo profile import-allreduce`, a CSV of bytes and time_us); at TP 4 (no 4-rank multimem times published)
  the file's own 4-rank table (NCCL), so the comm columns at TP 4 compare different kernels;
- `none` (`tpo simulate --embed-head`) against `baseline_multimem`, and the time communication
  adds (none - no comm) against theirs (baseline - no_ar);
- the best ISO split into 2 chunks (`tpo plan --strategies iso --max-chunks 2`, plus what
  `--embed-head` adds and plan leaves out: the embedding and its all-reduce, the final norm and
  the LM head, none of them overlapped) against `overlap_fused`: the share of the added time that
  overlap removes, (none - iso) / (none - no comm), against theirs, (baseline - overlap) /
  (baseline - no_ar). TokenWeave is not ISO: it also fuses the all-reduce with the residual add
  and RMSNorm (which is why it can beat no_ar) and runs its all-reduces on 2-8 CTAs; h100x8's
  fixed interference factors stand for what overlap costs.
--iso-allreduce-fusion plans ISO with `--allreduce-fusion add-norm` (each all-reduce's kernel
also adds to the residual and runs the next norm, as TokenWeave's fused kernel does) while
`none` stays as their baseline ran it (a plain all-reduce, then vLLM's fused add and norm).
--sm-clock MHZ predicts every point at that SM clock (tpo's --sm-clock: the GEMM and attention
rates scaled from the 1830 MHz the H100's peak is quoted at): their runs locked the clocks with
`nvidia-smi -lgc tdp`, the TDP (base) clock, below the one the datasheet peak is quoted at.
Also printed: the file's 8-rank all-reduce table (NVIDIA's nccl-tests) against their
torch.distributed (NCCL) and multimem times. Predictions only: nothing here is measured by us, and
no shipped file is changed."""
import json
import os
import sys
import tempfile

from tpo_predict import config_file, read_csv, run_tpo, summary, trace_event

MIB = 1 << 20
SM_CLOCK = []  # ["--sm-clock", MHZ] when given
ISO_EXTRA = []  # ["--allreduce-fusion", "add-norm"] with --iso-allreduce-fusion
BYTES_PER_TOKEN = 8192 * 2  # their all-reduce table's hidden size, bf16


def hardware_files(tpo, tmp, base, allreduce_rows):
    """(no comm, multimem, as is) copies of the base hardware file written under tmp. The
    multimem copy is made as a user would make it: `tpo profile import-allreduce` of a CSV."""
    with open(base) as f:
        hw = json.load(f)
    nocomm = json.loads(json.dumps(hw))
    nl = nocomm["node"]["link"]
    nl.pop("allreduce_table", None)
    nl["allreduce_latency_us"] = 0.0
    nl["busbw_gbps"] = 1e6  # the most a hardware file accepts
    paths = []
    for name, h in (("nocomm", nocomm), ("base", hw)):
        path = os.path.join(tmp, name + ".json")
        with open(path, "w") as f:
            json.dump(h, f)
        paths.append(path)
    csv_path, mm = os.path.join(tmp, "multimem.csv"), os.path.join(tmp, "multimem.json")
    with open(csv_path, "w") as f:
        f.write("# TokenWeave's published multimem all-reduce on 8x H100 "
                "(tokenweave-h100-allreduce.csv) on 8 CTAs, as their baseline_multimem runs\n"
                "bytes,time_us\n")
        for r in allreduce_rows:
            tokens = int(r["BL"])
            f.write(f"{tokens * BYTES_PER_TOKEN},{r['multimem_ar_us_ctas_8']}\n")
    run_tpo([tpo, "profile", "import-allreduce", csv_path, "--ranks", "8", "--hardware", paths[1],
         "--hardware-out", mm])
    return paths[0], mm, paths[1]


def simulate_us(tpo, hardware, model, tp, seq, extra=()):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "s.json")
        run_tpo([tpo, "simulate", "--model", model, "--hardware", hardware, "--tp", str(tp), "--seq",
             str(seq), "--exec", "eager", "--embed-head", "--strategy", "none", "--json", out]
            + SM_CLOCK + list(extra))
        return json.load(open(out))["total_us"]


def plan_iso(tpo, hardware, model, tp, seqs):
    """{seq: (none_us, best 2-chunk iso us, its chunks)} from `tpo plan` (no LM head)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "p.json")
        run_tpo([tpo, "plan", "--model", model, "--hardware", hardware, "--tp", str(tp), "--seq",
             ",".join(map(str, seqs)), "--strategies", "iso", "--max-chunks", "2", "--exec",
             "eager", "--quiet", "--json", out] + SM_CLOCK + ISO_EXTRA)
        p = json.load(open(out))
    res = {}
    for pt in p["points"]:
        iso = [c for c in pt["candidates"] if c["strategy"] == "iso"]
        best = min(iso, key=lambda c: c["total_us"])
        res[pt["seq_len"]] = (pt["none_us"], best["total_us"], best["chunks"])
    return res


def allreduce_us(tpo, hardware, tokens):
    """The time tpo charges the all-reduce of `tokens` x 8192 bf16 at TP 8 (llama3-70b)."""
    return trace_event(tpo, ["--model", "llama3-70b", "--hardware", hardware, "--tp", "8",
                             "--seq", str(tokens), "--layers", "1", "--strategy", "none"],
                       "allreduce")["dur"]


def main():
    args = sys.argv[1:]
    if "--sm-clock" in args:
        i = args.index("--sm-clock")
        if i + 1 >= len(args):
            sys.exit(__doc__)
        SM_CLOCK.extend(args[i:i + 2])
        del args[i:i + 2]
    if "--iso-allreduce-fusion" in args:
        args.remove("--iso-allreduce-fusion")
        ISO_EXTRA.extend(["--allreduce-fusion", "add-norm"])
    if len(args) not in (3, 4):
        sys.exit(__doc__)
    tpo, rows, ar_rows = args[0], read_csv(args[1]), read_csv(args[2])
    base = args[3] if len(args) == 4 else config_file("hardware", "h100x8")
    print(f"hardware: {os.path.relpath(base)}")
    if ISO_EXTRA:
        print("ISO planned with --allreduce-fusion add-norm (the all-reduce's kernel adds and "
              "normalizes, as TokenWeave's does); none as their baseline ran")
    if SM_CLOCK:
        print(f"SM clock: {SM_CLOCK[1]} MHz (tpo --sm-clock; their clocks were locked at the TDP "
              "clock, nvidia-smi -lgc tdp)")
    print("tpo on h100x8 (copies: all-reduce at zero, or TokenWeave's multimem times at TP 8), "
          "--exec eager, against TokenWeave's published vLLM prefill runs; err = predicted / "
          "published - 1\n")

    print("All-reduce, 8x H100, tokens x 8192 bf16: published (their runs) and tpo's h100x8 "
          "(NVIDIA's nccl-tests table)")
    print(f"{'MiB':>6} {'torch NCCL us':>14} {'multimem 16 CTAs':>17} {'h100x8 us':>10} "
          f"{'h100x8 / NCCL':>14}")
    nccl_err = []
    for r in ar_rows:
        tokens = int(r["BL"])
        ours = allreduce_us(tpo, base, tokens)
        torch_us = float(r["pytorch_dist_ar_us"])
        nccl_err.append(ours / torch_us - 1)
        print(f"{tokens * BYTES_PER_TOKEN / MIB:>6.0f} {torch_us:>14.1f} "
              f"{float(r['multimem_ar_us_ctas_16']):>17.1f} {ours:>10.1f} {ours / torch_us - 1:>+14.1%}")
    print("h100x8 against their torch.distributed NCCL: " + summary(nccl_err) + "\n")

    compute_err, total_err, added_err, removed, speedup_err = [], [], [], [], {}
    with tempfile.TemporaryDirectory() as tmp:
        nocomm, mm, as_is = hardware_files(tpo, tmp, base, ar_rows)
        groups = sorted({(int(r["tp"]), r["model"]) for r in rows}, key=lambda g: (-g[0], g[1]))
        for tp, model in groups:
            mine = sorted((r for r in rows if int(r["tp"]) == tp and r["model"] == model),
                          key=lambda r: int(r["prompt_len"]))
            seqs = [int(r["prompt_len"]) for r in mine]
            hw_comm = mm if tp == 8 else as_is
            iso = plan_iso(tpo, hw_comm, model, tp, seqs)
            print(f"{model}, TP {tp}" + ("" if tp == 8 else
                                         " (comm: h100x8's 4-rank NCCL table; theirs: multimem)"))
            print(f"{'tokens':>6} {'no comm ms pub / pred':>22} {'err':>7} {'none ms pub / pred':>21} "
                  f"{'err':>7} {'comm adds ms pub / pred':>24} {'overlap ms pub / iso pred':>26} "
                  f"{'removed pub / pred':>19} {'iso split':>12}")
            for r in mine:
                seq = int(r["prompt_len"])
                pub_none, noar, ovl = (float(r[k]) for k in
                                       ("baseline_multimem_ms", "no_ar_ms", "overlap_fused_ms"))
                p_nocomm = simulate_us(tpo, nocomm, model, tp, seq) / 1e3
                p_none = simulate_us(tpo, hw_comm, model, tp, seq) / 1e3
                none_plan, iso_us, chunks = iso[seq]
                # + the embedding, its all-reduce, the final norm and the LM head (not overlapped),
                # as the ISO plan ran (with --iso-allreduce-fusion: its none fused too)
                p_none_iso = (simulate_us(tpo, hw_comm, model, tp, seq, ISO_EXTRA) / 1e3
                              if ISO_EXTRA else p_none)
                p_iso = iso_us / 1e3 + (p_none_iso - none_plan / 1e3)
                rem_pub = (pub_none - ovl) / (pub_none - noar)
                rem_pred = (p_none - p_iso) / (p_none - p_nocomm)
                compute_err.append(p_nocomm / noar - 1)
                speedup_err.setdefault(tp, []).append((p_none / p_iso) / (pub_none / ovl) - 1)
                if tp == 8:
                    total_err.append(p_none / pub_none - 1)
                    added_err.append((p_none - p_nocomm) / (pub_none - noar) - 1)
                    removed.append((model, seq, rem_pub, rem_pred, pub_none / ovl, p_none / p_iso))
                print(f"{seq:>6} {noar:>10.1f} / {p_nocomm:<9.1f} {p_nocomm / noar - 1:>+7.1%} "
                      f"{pub_none:>9.1f} / {p_none:<9.1f} {p_none / pub_none - 1:>+7.1%} "
                      f"{pub_none - noar:>11.1f} / {p_none - p_nocomm:<10.1f} "
                      f"{ovl:>12.1f} / {p_iso:<11.1f} {rem_pub:>8.0%} / {rem_pred:<7.0%} "
                      f"{','.join(map(str, chunks)):>12}")
            print()

    print("No comm (compute alone), all " + str(len(compute_err)) + " points: " + summary(compute_err))
    print("TP 8, none with their multimem all-reduce: " + summary(total_err))
    print("TP 8, time communication adds (none - no comm against baseline - no_ar): "
          + summary(added_err))
    print("TP 8, speedup of overlap over none, published (TokenWeave) / predicted (ISO, 2 chunks): "
          + ", ".join(f"{m} {s}: {sp:.2f}x / {sq:.2f}x" for m, s, _, _, sp, sq in removed))
    for tp in sorted(speedup_err, reverse=True):
        print(f"TP {tp}, speedup over none, predicted (ISO) / published (TokenWeave) - 1: "
              + summary(speedup_err[tp]))
    print("TP 8, share of the added time removed, published / predicted: "
          + ", ".join(f"{m} {s}: {rp:.0%} / {rq:.0%}" for m, s, rp, rq, _, _ in removed))


if __name__ == "__main__":
    main()
