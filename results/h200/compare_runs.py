"""Two device-check runs side by side: the same validation cases, predicted and measured in each.

Usage: python3 results/h200/compare_runs.py OLD_DIR NEW_DIR

For the next GPU run's note ("compare the new run with the previous one", issues 10 and 11):
each run's reports (validate-*.json, exec-*.json) are read; a case is matched across the runs
by its file name, model, tokens, strategy and chunks. Printed:
1. what each run used: the binaries' git SHA, the attention kernel, how the predictions were
   made (cost model), how the emulated all-reduces were sized;
2. per matched case: predicted and measured time in each run, each run's error, and the
   measured time new / old (did the runtime itself get faster or slower);
3. for the matched cases: each run's median |error| and mean signed error, and the median of
   measured new / old;
4. cases only one run has (new steps such as --comm-ctas and --exec, or plans that chose
   other splits), with their error.
Every time here is a measurement of its run or a prediction made in it; nothing is refitted.
(To predict one run's measurements with the other run's model, use tpo calibrate.)"""
import glob
import json
import os
import statistics
import sys


def cases(run_dir):
    """(key, case, report) for every case of the run's validation reports."""
    out = {}
    meta = []
    for f in sorted(glob.glob(os.path.join(run_dir, "validate-*.json")) +
                    glob.glob(os.path.join(run_dir, "exec-*.json"))):
        try:
            j = json.load(open(f))
        except (OSError, ValueError) as e:
            print(f"  {os.path.basename(f)}: unreadable ({e})")
            continue
        meta.append(j)
        for c in j.get("cases", []):
            try:
                if not (c["measured_us"] > 0 and c["predicted_us"] > 0):
                    raise ValueError("no positive time")
                c["error"] = (c["predicted_us"] - c["measured_us"]) / c["measured_us"]
                chunks = "/".join(str(x) for x in c["strategy"].get("chunks", [])) or "-"
                key = (os.path.basename(f), c["model"], c.get("tp"), c.get("phase", "prefill"),
                       c.get("batch", 1), c.get("context", 0), c.get("num_layers"),
                       c["seq_len"], c["strategy"]["name"], chunks)
            except (KeyError, TypeError, ValueError) as e:
                print(f"  {os.path.basename(f)}: a case skipped ({e!r})")
                continue
            if key in out:
                print(f"  {os.path.basename(f)}: a case listed twice, the later kept: {key[1:]}")
            out[key] = (c, j)
    return out, meta


def used(meta):
    """What a run's reports say it used, each value with how many reports say it."""
    keys = {
        "git SHA": lambda j: j.get("git_sha", "?"),
        "attention kernel": lambda j: j.get("attention_kernel", "not recorded (cuBLAS then)"),
        "cost model": lambda j: j.get("cost_model", "?"),
        "emulated all-reduce": lambda j: (j.get("emulated_allreduce",
                                                "latency+bandwidth (not recorded)")
                                          if j.get("emulated_links") else "none (not emulated)"),
        "execution": lambda j: (j.get("execution") or {}).get("mode", "queued"),
        # Since 2026-12-04 each emulated copy is sized from the copy's rate and its fixed time
        # (a 16-byte copy's); before, from the rate alone, so every copy ran about that fixed
        # time (a few us) longer than its target.
        "copy sizing": lambda j: ("not emulated" if not j.get("emulated_links") else
                                  "rate + fixed time" if any("emulated_copy" in c for c in j.get("cases", []))
                                  else "rate only (each copy ~ a kernel's fixed time long)"),
    }
    for name, get in keys.items():
        counts = {}
        for j in meta:
            counts[str(get(j))] = counts.get(str(get(j)), 0) + 1
        print(f"    {name:20s} " + "; ".join(f"{v} ({n})" for v, n in sorted(counts.items())))


def summary(errs):
    if not errs:
        return "no cases"
    return (f"median |error| {100 * statistics.median(abs(e) for e in errs):.1f}%, "
            f"mean signed {100 * statistics.mean(errs):+.1f}% ({len(errs)} cases)")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n")[1])
    old_dir, new_dir = sys.argv[1], sys.argv[2]
    old, old_meta = cases(old_dir)
    new, new_meta = cases(new_dir)
    print(f"1. what each run used\n  old: {old_dir} ({len(old_meta)} reports, {len(old)} cases)")
    used(old_meta)
    print(f"  new: {new_dir} ({len(new_meta)} reports, {len(new)} cases)")
    used(new_meta)

    both = sorted(set(old) & set(new))
    print(f"\n2. the {len(both)} cases both runs measured (times in ms; error = (predicted - "
          "measured) / measured)")
    print(f"  {'report':44s} {'tokens':>6s} {'strategy':9s} {'chunks':11s} "
          f"{'old pred':>8s} {'old meas':>8s} {'old err':>7s} {'new pred':>8s} {'new meas':>8s} "
          f"{'new err':>7s} {'meas new/old':>12s}")
    oe, ne, ratio = [], [], []
    for k in both:
        (oc, _), (nc, _) = old[k], new[k]
        oe.append(oc["error"])
        ne.append(nc["error"])
        ratio.append(nc["measured_us"] / oc["measured_us"])
        print(f"  {k[0][:44]:44s} {k[7]:6d} {k[8]:9s} {k[9]:11s} "
              f"{oc['predicted_us'] / 1e3:8.3f} {oc['measured_us'] / 1e3:8.3f} "
              f"{100 * oc['error']:+6.1f}% {nc['predicted_us'] / 1e3:8.3f} "
              f"{nc['measured_us'] / 1e3:8.3f} {100 * nc['error']:+6.1f}% {ratio[-1]:12.3f}")

    print("\n3. on the cases both runs measured")
    print("  old run:", summary(oe))
    print("  new run:", summary(ne))
    if ratio:
        print(f"  measured new / old: median {statistics.median(ratio):.3f}, "
              f"{min(ratio):.3f} to {max(ratio):.3f}")

    for name, only in (("old", sorted(set(old) - set(new))), ("new", sorted(set(new) - set(old)))):
        print(f"\n4. cases only the {name} run has: {len(only)}")
        errs = []
        for k in only:
            c, _ = (old if name == "old" else new)[k]
            errs.append(c["error"])
            print(f"  {k[0][:44]:44s} {k[7]:6d} {k[8]:9s} {k[9]:11s} predicted "
                  f"{c['predicted_us'] / 1e3:8.3f} measured {c['measured_us'] / 1e3:8.3f} "
                  f"{100 * c['error']:+6.1f}%")
        if errs:
            print("  ", summary(errs))


if __name__ == "__main__":
    main()
