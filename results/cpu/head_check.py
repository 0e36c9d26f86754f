"""The embedding and LM head on the CPU: `validate --embed-head` (the runtimes run them since
2026-12-04) on Llama-3.1-8B's first 2 layers at TP 2, predicted from the committed CPU profile
(configs/profiles/cpu-vm-llama3.1-8b-tp2.json) against this VM's measured times. Per case: the
embedding, its all-reduce, the LM head, the logits gather and the whole run, predicted and
measured. CPU measurements only: nothing here ran on a GPU, and the CPU's all-reduce is a
shared-memory sum between threads, not NCCL.

Usage: [PROFILE=FILE] python3 results/cpu/head_check.py TPO [OUT_DIR]
  e.g. python3 results/cpu/head_check.py build/cli/tpo
  PROFILE: another CPU profile of Llama-3.1-8B TP 2 (e.g. one with decode rows and the LM head:
  tpo profile --backend cpu --model llama3.1-8b --tp 2 --quick --decode-rows 1,4 --out FILE)
"""
import json
import os

from window_check import ROOT, run, setup

PROFILE = os.environ.get("PROFILE") or os.path.join(ROOT,
                                                    "configs/profiles/cpu-vm-llama3.1-8b-tp2.json")
CASES = [
    ("decode, batch 4, context 512, sharded",
     ["--phase", "decode", "--batch", "4", "--seq", "512", "--strategy", "none"]),
    ("decode, batch 4, context 512, replicated",
     ["--phase", "decode", "--batch", "4", "--seq", "512", "--strategy", "none",
      "--vocab", "replicated"]),
    ("decode, batch 1, context 512, sharded",
     ["--phase", "decode", "--batch", "1", "--seq", "512", "--strategy", "none"]),
    ("prefill, 256 tokens, iso 2 chunks, sharded",
     ["--seq", "256", "--strategy", "iso", "--chunks", "2"]),
]
HEAD = ["embed", "allreduce@embed", "lm_head", "logits_gather"]


def main():
    tpo, out, _ = setup(__doc__)
    print(f"profile: {os.path.relpath(PROFILE, ROOT)}")
    print("case                                        op                pred us    meas us   error")
    for i, (name, args) in enumerate(CASES):
        rep = os.path.join(out, f"head-{i}.json")
        run([tpo, "validate", "--backend", "cpu", "--model", "llama3.1-8b", "--hardware",
             "cpu-host", "--tp", "2", "--layers", "2", "--repeat", "3", "--profile", PROFILE,
             "--embed-head", "--json", rep] + args)
        with open(rep) as f:
            case = json.load(f)["cases"][0]
        assert case["correct"], name
        rows = []
        for op in case["ops"]:
            if op["layer"] >= 0:
                continue
            key = "allreduce@embed" if op["name"] == "allreduce" else op["name"]
            rows.append((key, op["predicted_us"], op["measured_us"]))
        rows.append(("whole run", case["predicted_us"], case["measured_us"]))
        for key, p, m in rows:
            print(f"{name:43s} {key:16s} {p:10.1f} {m:10.1f} {100 * (p - m) / m:+6.1f}%")
        print(f"{name:43s} output vs reference: {case['error_vs_reference']:.1e}")


if __name__ == "__main__":
    main()
