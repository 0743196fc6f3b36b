#!/usr/bin/env python3
"""Prints the medians of the last `cargo bench` run and the ratios that matter, side by side.

    cargo bench --bench direct && python3 benches/report.py

Ratios, not times, are the figures to quote: the machines these run on are shared and noisy, and
a ratio of two benchmarks from the same run cancels most of that noise.
"""
import glob
import json
import os
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target", "criterion")

# (label, numerator, denominator): numerator / denominator, lower is better for tollgate.
RATIOS = [
    ("gcra allow / governor allow", "direct/tollgate/gcra/allow", "direct/governor/allow"),
    ("gcra allow / floor (clock + CAS)", "direct/tollgate/gcra/allow", "direct/floor/clock+cas"),
    ("gcra deny / gcra allow", "direct/tollgate/gcra/deny", "direct/tollgate/gcra/allow"),
    ("gcra deny / governor deny", "direct/tollgate/gcra/deny", "direct/governor/deny"),
    ("gcra decide / gcra allow", "direct/tollgate/gcra/decide", "direct/tollgate/gcra/allow"),
    ("sliding deny / gcra deny", "direct/tollgate/sliding_window/deny", "direct/tollgate/gcra/deny"),
    ("fixed allow / gcra allow", "direct/tollgate/fixed_window/allow", "direct/tollgate/gcra/allow"),
]


def medians():
    found = {}
    for path in glob.glob(os.path.join(ROOT, "**", "new", "benchmark.json"), recursive=True):
        with open(path) as f:
            name = json.load(f)["full_id"]
        with open(os.path.join(os.path.dirname(path), "estimates.json")) as f:
            found[name] = json.load(f)["median"]["point_estimate"]
    return found


def main():
    m = medians()
    if not m:
        sys.exit("no criterion results under target/criterion: run `cargo bench` first")
    print(f"{'benchmark':55s} {'median':>12s}")
    for name in sorted(m):
        print(f"{name:55s} {m[name]:9.2f} ns")
    print()
    print(f"{'ratio':55s} {'value':>12s}")
    ratios = list(RATIOS)
    # Contention: tollgate / governor at each thread count present.
    for name in sorted(m):
        if name.startswith("contended/tollgate/gcra/"):
            threads = name.rsplit("/", 1)[1]
            ratios.append((f"contended {threads}: tollgate / governor", name, f"contended/governor/{threads}"))
    for label, num, den in ratios:
        if num in m and den in m:
            print(f"{label:55s} {m[num] / m[den]:10.2f}x")


if __name__ == "__main__":
    main()
