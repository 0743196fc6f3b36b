#!/usr/bin/env python3
"""Prints the medians of the last `cargo bench` run and the ratios that matter, side by side.

    cargo bench --bench direct --bench keyed && python3 benches/report.py

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
    # Keyed: tollgate / governor per size and distribution, and against the floors.
    for size in ("1M", "100k"):
        for dist in ("uniform", "zipf"):
            ratios.append((f"keyed {size} {dist}: tollgate / governor",
                           f"keyed/tollgate/{size}/{dist}", f"keyed/governor/{size}/{dist}"))
            ratios.append((f"keyed {size} {dist}: tollgate check_keys / governor",
                           f"keyed/tollgate-batch/{size}/{dist}", f"keyed/governor/{size}/{dist}"))
    ratios.append(("keyed 1M uniform: tollgate / one DRAM access", "keyed/tollgate/1M/uniform", "keyed/floor/dram"))
    ratios.append(("keyed 1M uniform: tollgate / floor (clock+miss+CAS)", "keyed/tollgate/1M/uniform", "keyed/floor/clock+miss+cas"))
    threads = sorted((n for n in m if n.startswith("threads/tollgate/1M/")), key=lambda n: int(n.rsplit("/", 1)[1][:-1]))
    if len(threads) >= 2:
        one, many = threads[0], threads[-1]
        t = int(many.rsplit("/", 1)[1][:-1])
        # Criterion reports time per check per thread: throughput scales by t × one / many.
        print_scaling = (f"keyed distinct keys: {t} threads / 1 thread throughput", t * m[one] / m[many])
    else:
        print_scaling = None
    # Contention: tollgate / governor at each thread count present.
    for name in sorted(m):
        if name.startswith("contended/tollgate/gcra/"):
            threads = name.rsplit("/", 1)[1]
            ratios.append((f"contended {threads}: tollgate / governor", name, f"contended/governor/{threads}"))
    for label, num, den in ratios:
        if num in m and den in m:
            print(f"{label:55s} {m[num] / m[den]:10.2f}x")
    if print_scaling:
        print(f"{print_scaling[0]:55s} {print_scaling[1]:10.2f}x")


if __name__ == "__main__":
    main()
