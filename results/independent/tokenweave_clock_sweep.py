"""tokenweave_check.py at a range of SM clocks (tpo --sm-clock): how its errors against
TokenWeave's published H100 runs depend on the clock the predictions assume. Their runs locked the
clocks with `nvidia-smi -lgc tdp` (NVML's TDP clock, the one NVIDIA's nvbench calls the base
clock); the H100's datasheet peak is quoted at 1830 MHz. Nothing is fitted: every line is the
same model at another clock.

Usage: python3 tokenweave_clock_sweep.py TPO PREFILL_CSV ALLREDUCE_CSV [FIRST LAST STEP]
  e.g. python3 results/independent/tokenweave_clock_sweep.py build/cli/tpo \\
           results/independent/tokenweave-h100-prefill.csv \\
           results/independent/tokenweave-h100-allreduce.csv"""
import os
import re
import subprocess
import sys

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tokenweave_check.py")
LINES = (("No comm (compute alone)", "compute alone, 28 points"),
         ("TP 8, none with their multimem", "TP 8 none, 14 points"),
         ("TP 8, speedup over none", "TP 8 ISO speedup"),
         ("TP 4, speedup over none", "TP 4 ISO speedup"))


def main():
    if len(sys.argv) not in (4, 7):
        sys.exit(__doc__)
    first, last, step = (int(x) for x in sys.argv[4:7]) if len(sys.argv) == 7 else (1500, 1830, 30)
    clocks = list(range(first, last + 1, step))
    if clocks[-1] != last:
        clocks.append(last)
    print("errors of tpo's h100x8 predictions (median |error| / mean signed) against TokenWeave's "
          "published runs, by the SM clock assumed (--sm-clock; 1830 = the clock the datasheet "
          "peak is quoted at)")
    print(f"{'MHz':>5} " + " ".join(f"{label:>28}" for _, label in LINES))
    for mhz in clocks:
        out = subprocess.run([sys.executable, CHECK, *sys.argv[1:4], "--sm-clock", str(mhz)],
                             capture_output=True, text=True, check=True).stdout
        cells = []
        for start, _ in LINES:
            line = next(l for l in out.splitlines() if l.startswith(start))
            med = re.search(r"median \|error\|\s+([\d.]+)%", line).group(1)
            mean = re.search(r"mean signed\s+([+-]?[\d.]+)%", line).group(1)
            cells.append(f"{med:>6}% / {float(mean):+6.1f}%")
        print(f"{mhz:>5} " + " ".join(f"{c:>28}" for c in cells))


if __name__ == "__main__":
    main()
