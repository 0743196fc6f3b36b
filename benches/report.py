#!/usr/bin/env python3
"""Prints the figures of a benchmark run, and draws its plots.

    cargo bench --bench paired && python3 benches/report.py --paired
    cargo bench --bench paired -- readme && python3 benches/report.py --paired --readme
    python3 benches/report.py --scaling DIR
    cargo bench --bench direct --bench keyed && python3 benches/report.py

With `--paired [FILE]`: the rows of a run of `benches/paired.rs` (the latest one that it recorded
under target/tmp/paired/, or FILE), and two plots of them, as SVG files beside the record (or in
`--out DIR`): `<run>-vs-governor.svg`, tollgate's decisions per second over governor's in each
row that compares them, and `<run>-vs-floor.svg`, tollgate's time per check over the hardware
floor's. With `--readme` as well: the README's table, rounded. With `--scaling DIR`: the rows of
distinct keys from several threads in the records of one machine in DIR (runs of some rows each,
as a lent machine's short calls make them), and a plot, `<DIR>-scaling.svg` beside DIR (or in
`--out DIR`), of n threads' throughput over one thread's, for tollgate and for the two-line
floor. Without any of these: the medians of the last criterion run (`benches/direct.rs`,
`keyed.rs`) and the ratios that matter.

Ratios, not times, are the figures to quote: the machines these run on are shared and noisy, and
a ratio of two measurements from the same run cancels most of that noise.
"""
import argparse
import datetime
import glob
import json
import os
import re
import statistics
import sys
from xml.sax.saxutils import escape

TARGET = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "target")
ROOT = os.path.join(TARGET, "criterion")
PAIRED = os.path.join(TARGET, "tmp", "paired")

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


def criterion_report():
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


# The paired rows that compare tollgate with governor (time ratio tollgate / governor), and the
# label each gets in the plot. Rows are plotted in the order the run made them.
VS_GOVERNOR = [
    (r"allow: tollgate gcra / governor", "direct check, admitting"),
    (r"deny:  tollgate gcra / governor", "direct check, denying"),
    (r"allow, (\d+) threads: tollgate / governor", r"direct, \1 threads on one limiter, admitting"),
    (r"keyed (\S+) (uniform|zipf): tollgate / governor", r"keyed, \1 keys, \2: check_key"),
    (r"keyed (\S+) (uniform|zipf): tollgate check_keys \(batches of (\d+)\) / governor",
     r"keyed, \1 keys, \2: check_keys, batches of \3"),
    (r"keyed (\S+) String keys: tollgate / governor", r"keyed, \1 String keys: check_key"),
    (r"keyed (\S+) String keys: tollgate check_keys \(batches of (\d+)\) / governor",
     r"keyed, \1 String keys: check_keys, batches of \2"),
    (r"keyed (\S+) (uniform|zipf): coarse clocks, tollgate / governor",
     r"keyed, \1 keys, \2: check_key, coarse clocks"),
    (r"keyed distinct keys, (\d+) threads: tollgate / governor", r"keyed, distinct keys, \1 threads"),
    (r"keyed hot key, (\d+) threads: allow, tollgate / governor", r"keyed, one hot key, \1 threads, admitting"),
    (r"keyed hot key, (\d+) threads: deny, tollgate / governor", r"keyed, one hot key, \1 threads, denying"),
]

# The rows that compare tollgate with a floor: the least that the same memory traffic (or the
# same clock read and compare-and-swap) costs.
VS_FLOOR = [
    (r"allow: tollgate gcra / floor \(clock \+ CAS\)", "direct check / clock read + CAS"),
    (r"keyed (\S+) (uniform|zipf): tollgate / floor \(clock \+ CAS of a random slot\)",
     r"keyed, \1 keys, \2 / clock + CAS of a random slot"),
    (r"keyed (\S+) (uniform|zipf): tollgate / two-line floor", r"keyed, \1 keys, \2 / two-line floor"),
    (r"keyed (\S+) (uniform|zipf): tollgate / four-line floor", r"keyed, \1 keys, \2 / four-line floor"),
    (r"keyed 1M uniform: tollgate / one DRAM access", "keyed, 1M keys, uniform / one dependent DRAM read"),
    (r"keyed distinct keys, (\d+) threads: tollgate / two-line floor",
     r"keyed, distinct keys, \1 threads / two-line floor"),
    (r"keyed distinct keys, (\d+) threads: tollgate / four-line floor",
     r"keyed, distinct keys, \1 threads / four-line floor"),
]


def read_record(path):
    """The header fields and rows of a record written by `benches/paired.rs`."""
    header, rows = {}, []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("# "):
                key, sep, value = line[2:].partition(": ")
                if sep:
                    header[key] = value
            elif line:
                name, a, b, ratio, q1, q3 = line.split("\t")
                rows.append((name, float(a), float(b), float(ratio), float(q1), float(q3)))
    return header, rows


def by_name(rows):
    """A record's rows as a dict of name to (A's median time, B's median time, median ratio)."""
    return {name: (a, b, ratio) for name, a, b, ratio, _, _ in rows}


def select(rows, patterns, invert):
    """(label, value, low, high) for each row that a pattern names, in the run's order: the ratio
    and its interquartile range, or their inverses (B's time over A's: how many times A's
    throughput) with `invert`."""
    picked = []
    for name, _, _, ratio, q1, q3 in rows:
        for pattern, label in patterns:
            if re.fullmatch(pattern, name):
                values = (1 / ratio, 1 / q3, 1 / q1) if invert else (ratio, q1, q3)
                picked.append((re.sub(pattern, label, name),) + values)
                break
    return picked


def svg_start(width, height, title, subtitle):
    """The opening lines of a chart: the canvas, on white, with its title and subtitle lines."""
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="10" y="22" font-size="15" font-weight="bold">{escape(title)}</text>',
    ]
    for i, text in enumerate(subtitle):
        out.append(f'<text x="10" y="{40 + 14 * i}" font-size="11" fill="#555">{escape(text)}</text>')
    return out


def svg_bars(title, subtitle, bars, lines, unit):
    """A horizontal bar chart: a bar per (label, value, low, high), with a whisker from low to high
    and the value written beside it, and a vertical rule per (x, caption) in `lines`."""
    # Labels are sized at 6.6 pixels a character, a little over the average width of 12-pixel
    # sans-serif text, so that the longest fits.
    label_width = 20 + int(6.6 * max(len(label) for label, _, _, _ in bars))
    plot_width, right = 420, 70
    row, top, bottom = 22, 34 + 14 * len(subtitle) + 24, 40
    width = label_width + plot_width + right
    height = top + row * len(bars) + bottom
    most = max([high for _, _, _, high in bars] + [x for x, _ in lines])
    step = 0.5 if most <= 3 else 1 if most <= 8 else 2
    limit = step * (int(most / step) + 1)
    x = lambda v: label_width + plot_width * v / limit
    out = svg_start(width, height, title, subtitle)
    axis = top + row * len(bars)
    tick = 0.0
    while tick <= limit + 1e-9:
        out.append(f'<line x1="{x(tick):.1f}" y1="{top - 4}" x2="{x(tick):.1f}" y2="{axis}" '
                   'stroke="#e4e4e4"/>')
        out.append(f'<text x="{x(tick):.1f}" y="{axis + 16}" text-anchor="middle" '
                   f'fill="#555">{tick:g}{unit}</text>')
        tick += step
    for i, (label, value, low, high) in enumerate(bars):
        y = top + row * i
        out.append(f'<text x="{label_width - 8}" y="{y + 15}" text-anchor="end">{escape(label)}</text>')
        out.append(f'<rect x="{x(0):.1f}" y="{y + 4}" width="{x(value) - x(0):.1f}" height="14" '
                   'fill="#4878a8"/>')
        mid = y + 11
        out.append(f'<line x1="{x(low):.1f}" y1="{mid}" x2="{x(high):.1f}" y2="{mid}" stroke="#222"/>')
        for end in (low, high):
            out.append(f'<line x1="{x(end):.1f}" y1="{mid - 4}" x2="{x(end):.1f}" y2="{mid + 4}" '
                       'stroke="#222"/>')
        out.append(f'<text x="{x(max(value, high)) + 5:.1f}" y="{y + 15}">{value:.2f}{unit}</text>')
    for at, caption in lines:
        out.append(f'<line x1="{x(at):.1f}" y1="{top - 4}" x2="{x(at):.1f}" y2="{axis}" '
                   'stroke="#c03030" stroke-dasharray="5,3"/>')
        out.append(f'<text x="{x(at):.1f}" y="{top - 8}" text-anchor="middle" fill="#c03030" '
                   f'font-size="11">{escape(caption)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def paired_report(path, out_dir):
    header, rows = read_record(path)
    print(os.path.normpath(path))
    for key, value in header.items():
        print(f"  {key}: {value}")
    print()
    print(f"{'row (A / B)':72s} {'A':>9s} {'B':>9s} {'A / B':>7s}  IQR")
    for name, a, b, ratio, q1, q3 in rows:
        print(f"{name:72s} {a:6.2f} ns {b:6.2f} ns {ratio:7.3f}  {q1:.3f} .. {q3:.3f}")
    when = datetime.datetime.fromtimestamp(int(header.get("unix time", "0")), datetime.timezone.utc)
    rounds = header.get("rounds", "?").split(" ")[0]
    subtitle = [
        f"One run of `cargo bench --bench paired`, {when:%Y-%m-%d}, at {header.get('commit', '?')}, "
        f"on {header.get('cpus', '?')} CPUs of {header.get('cpu', '?')}.",
        f"Each bar is the median of {rounds} ratios, one per round, in which the two sides were timed "
        "one after the other;",
        "the whisker spans the middle half of the ratios.",
    ]
    stem = os.path.splitext(os.path.basename(path))[0]
    out_dir = out_dir or os.path.dirname(os.path.abspath(path))
    os.makedirs(out_dir, exist_ok=True)
    charts = [
        ("vs-governor", "tollgate's decisions per second, over governor's (higher is faster)",
         select(rows, VS_GOVERNOR, invert=True), [(1, "governor"), (2, "2×")], "×"),
        ("vs-floor", "tollgate's time per check, over the hardware floor's (lower is faster)",
         select(rows, VS_FLOOR, invert=False), [(1, "the floor")], "×"),
    ]
    print()
    for suffix, title, bars, lines, unit in charts:
        if not bars:
            print(f"no rows for {suffix} in this run: not drawn")
            continue
        target = os.path.join(out_dir, f"{stem}-{suffix}.svg")
        with open(target, "w", encoding="utf-8") as f:
            f.write(svg_bars(title, subtitle, bars, lines, unit))
        print(f"drew {target}")


# The rows that say how distinct keys scale: one thread's time per check over the time per check
# of a group of n threads, each checking keys of its own, which is n threads' throughput over
# one thread's.
SCALING = [
    (r"keyed distinct keys: 1 thread / (\d+) threads, time per check", "tollgate", "#4878a8"),
    (r"keyed distinct keys: two-line floor, 1 thread / (\d+) threads", "two-line floor", "#d08030"),
]


def scaling_points(records):
    """{series: {threads: (ratio, q1, q3)}} from the records' rows that SCALING names, and the
    indices of the records that gave them. Where records repeat a row, the one of the most rounds
    gives it (the first, among equals)."""
    points, rounds_of, source = {}, {}, {}
    for index, (header, rows) in enumerate(records):
        rounds = int(header.get("rounds", "0").split(" ")[0] or 0)
        for name, _, _, ratio, q1, q3 in rows:
            for pattern, series, _ in SCALING:
                found = re.fullmatch(pattern, name)
                if found:
                    threads = int(found.group(1))
                    if rounds > rounds_of.get((series, threads), -1):
                        rounds_of[(series, threads)] = rounds
                        points.setdefault(series, {})[threads] = (ratio, q1, q3)
                        source[(series, threads)] = index
    return points, set(source.values())


def svg_scaling(title, subtitle, points):
    """A line chart of throughput over one thread's against the thread count: a line per series
    of `points` through (1, 1) and its measured counts, with each point's interquartile range as
    a whisker, and a dashed line for linear scaling."""
    most = max(threads for series in points.values() for threads in series)
    left, plot_width, plot_height, right = 60, 460, 300, 150
    top, bottom = 34 + 14 * len(subtitle) + 16, 44
    # Subtitle lines are sized at 6.2 pixels a character, a little over the average width of
    # 11-pixel sans-serif text.
    width = max(left + plot_width + right, 20 + int(6.2 * max(len(text) for text in subtitle)))
    height = top + plot_height + bottom
    step = 2 if most <= 16 else 4 if most <= 32 else 8
    limit = step * ((most + step - 1) // step)
    x = lambda t: left + plot_width * t / limit
    y = lambda v: top + plot_height * (1 - v / limit)
    out = svg_start(width, height, title, subtitle)
    for tick in range(0, limit + 1, step):
        out.append(f'<line x1="{x(0):.1f}" y1="{y(tick):.1f}" x2="{x(limit):.1f}" y2="{y(tick):.1f}" '
                   'stroke="#e4e4e4"/>')
        out.append(f'<text x="{x(0) - 8:.1f}" y="{y(tick) + 4:.1f}" text-anchor="end" '
                   f'fill="#555">{tick}×</text>')
        out.append(f'<text x="{x(tick):.1f}" y="{y(0) + 16:.1f}" text-anchor="middle" '
                   f'fill="#555">{tick}</text>')
    out.append(f'<text x="{x(limit / 2):.1f}" y="{y(0) + 34:.1f}" text-anchor="middle">threads</text>')
    out.append(f'<line x1="{x(1):.1f}" y1="{y(1):.1f}" x2="{x(limit):.1f}" y2="{y(limit):.1f}" '
               'stroke="#888" stroke-dasharray="5,3"/>')
    out.append(f'<text x="{x(limit) + 8:.1f}" y="{y(limit) + 4:.1f}" fill="#888">linear</text>')
    for _, series, colour in SCALING:
        measured = points.get(series)
        if not measured:
            continue
        line = [(1, 1.0)] + [(t, measured[t][0]) for t in sorted(measured)]
        path = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in line)
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for t in sorted(measured):
            ratio, q1, q3 = measured[t]
            out.append(f'<line x1="{x(t):.1f}" y1="{y(q1):.1f}" x2="{x(t):.1f}" y2="{y(q3):.1f}" '
                       f'stroke="{colour}"/>')
            out.append(f'<circle cx="{x(t):.1f}" cy="{y(ratio):.1f}" r="3" fill="{colour}"/>')
        last = max(measured)
        out.append(f'<text x="{x(last) + 8:.1f}" y="{y(measured[last][0]) + 4:.1f}" '
                   f'fill="{colour}">{escape(series)}: {measured[last][0]:.1f}×</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def scaling_report(directory, out_dir):
    """Prints the scaling rows of the records in `directory` (runs of `benches/paired.rs` on one
    machine, each perhaps of some rows only) and draws them as `<directory>-scaling.svg`."""
    paths = sorted(glob.glob(os.path.join(directory, "*.tsv")))
    if not paths:
        sys.exit(f"no records (*.tsv) in {directory}")
    records = [read_record(path) for path in paths]
    points, used = scaling_points(records)
    if not points:
        sys.exit(f"no rows of distinct keys from several threads in {directory}")
    for series, measured in points.items():
        for threads in sorted(measured):
            ratio, q1, q3 = measured[threads]
            print(f"{series:15s} {threads:3d} threads: {ratio:6.2f}x one thread  (IQR {q1:.2f} .. {q3:.2f})")
    headers = [records[i][0] for i in sorted(used)]
    days = sorted({datetime.datetime.fromtimestamp(int(h.get("unix time", "0")),
                                                   datetime.timezone.utc).strftime("%Y-%m-%d")
                   for h in headers})
    commits = sorted({h.get("commit", "?") for h in headers})
    cpus = sorted({f"{h.get('cpus', '?')} CPUs of {h.get('cpu', '?')}" for h in headers})
    rounds = sorted({h.get("rounds", "?").split(" ")[0] for h in headers}, key=lambda r: (len(r), r))
    rounds_said = rounds[0] if len(rounds) == 1 else f"{rounds[0]} to {rounds[-1]}"
    subtitle = [
        f"Runs of `cargo bench --bench paired -- \"keyed distinct\"`, {', '.join(days)}, at "
        f"{', '.join(commits)},",
        f"on {'; '.join(cpus)}.",
        "Each thread checks keys of its own from one table of a million; one thread checks the "
        "whole million.",
        f"Each point is the median of {rounds_said} per-round ratios of one thread's time per "
        "check over the group's;",
        "the whisker spans their middle half. The two-line floor reads the clock and two slots "
        "and writes one, and does nothing else.",
    ]
    name = os.path.basename(os.path.normpath(directory))
    out_dir = out_dir or os.path.dirname(os.path.abspath(os.path.normpath(directory)))
    os.makedirs(out_dir, exist_ok=True)
    target = os.path.join(out_dir, f"{name}-scaling.svg")
    with open(target, "w", encoding="utf-8") as f:
        f.write(svg_scaling("Distinct keys from n threads: throughput over one thread's", subtitle, points))
    print(f"drew {target}")


# The README's table: (label, row against governor, row against a floor), from the rows that
# `cargo bench --bench paired -- readme` runs (`README_ROWS` in benches/support/rounds.rs).
README = [
    ("direct `check()`, admitting", "allow: tollgate gcra / governor",
     "allow: tollgate gcra / floor (clock + CAS)", "one clock read and one compare-and-swap"),
    ("direct `check()`, denying", "deny:  tollgate gcra / governor", None, None),
    ("keyed, 1M keys, `check_key`", "keyed 1M uniform: tollgate / governor",
     "keyed 1M uniform: tollgate / one DRAM access", "one dependent read of a table this size"),
    ("keyed, 1M keys, `check_keys` (batches of 64)",
     "keyed 1M uniform: tollgate check_keys (batches of 64) / governor", None, None),
    ("keyed, 100k keys, `check_key`", "keyed 100k uniform: tollgate / governor",
     "keyed 100k uniform: tollgate / four-line floor",
     "the lines a check fetches, a clock read and a compare-and-swap"),
    ("keyed, distinct keys from 2 threads", "keyed distinct keys, 2 threads: tollgate / governor",
     None, None),
]
MEMORY = "memory per key held, 1M {} keys: tollgate / governor"


def readme_report(path):
    """Prints the README's performance table, rounded, from a record of the `readme` rows."""
    header, rows = read_record(path)
    ratio = {name: r for name, _, _, r, _, _ in rows}
    fields = {name: (a, b) for name, a, b, _, _, _ in rows}
    missing = [name for _, gov, floor, _ in README for name in (gov, floor) if name and name not in ratio]
    missing += [MEMORY.format(kind) for kind in ("u64", "IpAddr", "String") if MEMORY.format(kind) not in ratio]
    if missing:
        sys.exit(f"{path} lacks rows of the README's table (run `cargo bench --bench paired -- "
                 f"readme`): {missing}")
    print(f"{os.path.basename(path)}: {header.get('cpu', '?')}, {header.get('cpus', '?')} CPUs, "
          f"{header.get('rounds', '?')}", file=sys.stderr)
    print("| | throughput, × governor's | time, × the floor's |")
    print("|---|---|---|")
    for label, gov, floor, floor_name in README:
        against_floor = f"{ratio[floor]:.2f} ({floor_name})" if floor else ""
        print(f"| {label} | {1 / ratio[gov]:.1f}× | {against_floor} |")
    scaling = ratio["keyed distinct keys: 1 thread / 2 threads, time per check"]
    print(f"| keyed, distinct keys: 2 threads over 1 | {scaling:.1f}× one thread's | |")
    bytes_ = [fields[MEMORY.format(kind)] for kind in ("u64", "IpAddr", "String")]
    ours = " / ".join(f"{a:.1f}" for a, _ in bytes_)
    theirs = " / ".join(f"{b:.1f}" for _, b in bytes_)
    print(f"| memory per key (`u64` / `IpAddr` / `String`) | tollgate {ours} B, governor "
          f"{theirs} B | |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--paired", nargs="?", const="latest", metavar="FILE",
                        help="a record of benches/paired.rs (default: the latest)")
    parser.add_argument("--scaling", metavar="DIR",
                        help="a folder of records of one machine: draw how distinct keys scale")
    parser.add_argument("--out", metavar="DIR", help="where the plots go (default: beside the record)")
    parser.add_argument("--readme", action="store_true",
                        help="with --paired: print the README's table from the record")
    args = parser.parse_args()
    if args.scaling is not None:
        scaling_report(args.scaling, args.out)
        return
    if args.paired is None:
        criterion_report()
        return
    path = args.paired
    if path == "latest":
        runs = glob.glob(os.path.join(PAIRED, "run-*.tsv"))
        if not runs:
            sys.exit("no record under target/tmp/paired: run `cargo bench --bench paired` first")
        path = max(runs, key=lambda run: int(re.search(r"run-(\d+)", run).group(1)))
    if args.readme:
        readme_report(path)
    else:
        paired_report(path, args.out)


if __name__ == "__main__":
    main()
