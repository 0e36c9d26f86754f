"""Shared by the results/independent check scripts: running tpo, the shipped config files, an
op's time from the Chrome trace of `tpo simulate` (its standalone time, per-kernel term
included), the published-data CSV reader, and the error summary. Predictions only: nothing here
measures anything."""
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile


def read_csv(path):
    """The rows of a CSV whose header lines start with '#' (the data's provenance)."""
    with open(path) as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def check_args(doc):
    """TPO, HARDWARE and the CSV's rows from `script TPO HARDWARE CSV`; exits with `doc` else."""
    if len(sys.argv) != 4:
        sys.exit(doc)
    return sys.argv[1], sys.argv[2], read_csv(sys.argv[3])


def run_tpo(cmd):
    """Runs a tpo command line; exits naming tpo's error if it fails."""
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd[:2])} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r


def configs_dir():
    """The configs tpo reads: $TPO_CONFIG_DIR as tpo reads it, else this checkout's."""
    here = os.path.dirname(os.path.abspath(__file__))
    return os.environ.get("TPO_CONFIG_DIR") or os.path.join(here, "..", "..", "configs")


def config_file(kind, name):
    """The path of a shipped config ("hardware" or "models"), or `name` where it is a file."""
    if os.path.exists(name):
        return name
    return os.path.join(configs_dir(), kind, name + ".json")


def trace_event(tpo, simulate_args, op_name):
    """The first trace event of `op_name` when `tpo simulate` runs with `simulate_args`."""
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "trace.json")
        run_tpo([tpo, "simulate"] + simulate_args + ["--trace", trace])
        t = json.load(open(trace))
    events = t["traceEvents"] if isinstance(t, dict) else t
    return next(e for e in events if e.get("ph") == "X" and e.get("name") == op_name)


def predict_op(tpo, hardware, model, simulate_args, op_name):
    """The trace event of `op_name` when `tpo simulate` runs `model` (a tpo.model/1 dict) at
    TP 1 with `simulate_args` (e.g. ["--seq", "2048"]); exits naming tpo's error if it fails."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.json")
        with open(path, "w") as f:
            json.dump(dict({"schema": "tpo.model/1", "num_hidden_layers": 1,
                            "vocab_size": 32000}, **model), f)
        return trace_event(tpo, ["--model", path, "--hardware", hardware, "--tp", "1",
                                 "--strategy", "none"] + simulate_args, op_name)


def summary(errors):
    """Median and worst |error| and the mean signed error of relative errors."""
    a = sorted(abs(e) for e in errors)
    return (f"median |error| {statistics.median(a):5.1%}, worst {a[-1]:5.1%}, "
            f"mean signed {statistics.mean(errors):+5.1%}")
