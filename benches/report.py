#!/usr/bin/env python3
"""Prints the figures of a benchmark run, and draws the plots that the README shows.

    cargo bench --bench paired && python3 benches/report.py --paired
    python3 benches/report.py --scaling benches/plots/2026-11-25-16-cores
    python3 benches/report.py --across [--figure "dependent reads"] [--each]
    cargo bench --bench direct --bench keyed && python3 benches/report.py

With `--paired [FILE]`: the rows of a run of `benches/paired.rs` (the latest one that it recorded
under target/tmp/paired/, or FILE), and two plots of them, as SVG files beside the record (or in
`--out DIR`): `<run>-vs-governor.svg`, tollgate's decisions per second over governor's in each
row that compares them, and `<run>-vs-floor.svg`, tollgate's time per check over the hardware
floor's. The plots are drawn from the record alone, so the same record always gives the same
files. With `--scaling DIR`: the rows of distinct keys from several threads in the records of
one machine in DIR (runs of some rows each, as a lent machine's short calls make them), and a
plot, `<DIR>-scaling.svg` beside DIR (or in `--out DIR`), of n threads' throughput over one
thread's, for tollgate and for the two-line floor. With `--across [DIR]`: every record under DIR
(default `benches/plots`), grouped by CPU, and per group the least, median and most value of each
figure that the READMEs quote per CPU (the ratios of some rows, and figures derived from two rows
of one run, such as governor's time in dependent reads), so that a range the READMEs give can be
checked against the records; `--each` lists every record's value. Without any of these: the
medians of the last criterion run (`benches/direct.rs`, `keyed.rs`) and the ratios that matter.

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
PLOTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plots")

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


# The microarchitectures behind the `cpu:` lines that records carry (the vendor's name for the
# family and model), so that records group under the names the READMEs use. A CPU not listed here
# groups under its `cpu:` line as it stands. A guest's numbers are not always its host's: model 167
# is Rocket Lake's, a part with neither AMX nor more than 16 MiB of L3, and the guest that reported
# it had Sapphire Rapids' features and caches (AMX without AMX-FP16, 2 MiB of L2 per core, 105 MiB
# of L3), so its records group under that name, with the number beside it.
CORES = {
    ("Intel", 6, 85): "Cascade Lake",
    ("Intel", 6, 167): "Sapphire Rapids (model 167)",
    ("Intel", 6, 207): "Emerald Rapids",
    ("AMD", 23, 1): "QEMU's EPYC model",
    ("AMD", 25, 1): "Zen 3",
    ("AMD", 25, 17): "Zen 4",
    ("AMD", 26, 2): "Zen 5",
}


def core_of(header):
    """The name that a record's CPU groups under, with its count of CPUs: records of one core on
    2 vCPUs and on a 16-core machine measure different things (its L3, its neighbours)."""
    cpu = header.get("cpu", "?")
    found = re.search(r"\(family (\d+), model (\d+)\)", cpu)
    vendor = "Intel" if "Intel" in cpu else "AMD" if "AMD" in cpu else "?"
    name = CORES.get((vendor, int(found.group(1)), int(found.group(2)))) if found else None
    return f"{name or cpu}, {header.get('cpus', '?')} CPUs"


def row_ratio(name):
    """A figure that is a row's median ratio, A's time over B's."""
    return lambda rows: rows[name][2] if name in rows else None


def added_over_governor(size, side):
    """What a check adds to the work between checks over what governor's adds: from the rows that
    time each limiter between other work against the work alone, (ratio - 1) over governor's.
    Absent where governor's row shows no added time (a ratio of 1 or less, which only noise could
    give): a quotient over nothing, or over a negative, would not be a measurement."""
    prefix = f"keyed {size} uniform: between other work, "
    row, governor = f"{prefix}{side} / the work alone", f"{prefix}governor / the work alone"

    def figure(rows):
        if row in rows and governor in rows and rows[governor][2] > 1:
            return (rows[row][2] - 1) / (rows[governor][2] - 1)
        return None
    return figure


def added_over_floor(size):
    """What a check adds to the work between checks over what the four-line floor adds; absent,
    like its two parts, where the floor's row shows no added time."""
    tollgate, floor = added_over_governor(size, "tollgate"), added_over_governor(size, "four-line floor")

    def figure(rows):
        check, least = tollgate(rows), floor(rows)
        return check / least if check is not None and least is not None and least > 0 else None
    return figure


def added_in_reads(side):
    """What a check over a million keys adds to the work between checks in dependent reads: the
    row's A time less its B time (the work alone), over one dependent read's time in the same run
    (only the million-key table has a row that times one)."""
    row = f"keyed 1M uniform: between other work, {side} / the work alone"

    def figure(rows):
        if row in rows and DRAM_1M in rows:
            return (rows[row][0] - rows[row][1]) / rows[DRAM_1M][1]
        return None
    return figure


KEYED_1M = "keyed 1M uniform: tollgate / governor"
DRAM_1M = "keyed 1M uniform: tollgate / one DRAM access"


def governor_in_reads(rows):
    """Governor's time per check over a million keys in dependent reads: its median time in the
    row against tollgate over one dependent read's median time in the same run."""
    if KEYED_1M in rows and DRAM_1M in rows:
        return rows[KEYED_1M][1] / rows[DRAM_1M][1]
    return None


# The figures that the READMEs quote per CPU, and how each comes from one record's rows (a dict
# of row name to (A's time, B's time, ratio)). Times over times, lower better for tollgate, but
# for the threads' figures over one thread's: one thread's time over n threads', n threads'
# throughput over one thread's, higher better.
FIGURES = [
    ("direct check, admitting: time over governor's", row_ratio("allow: tollgate gcra / governor")),
    ("direct check: time over the floor's (clock + CAS)",
     row_ratio("allow: tollgate gcra / floor (clock + CAS)")),
    ("direct check: a denial's time over an admission's", row_ratio("deny / allow: tollgate gcra")),
    ("distinct keys, 2 threads: throughput over one thread's",
     row_ratio("keyed distinct keys: 1 thread / 2 threads, time per check")),
    ("distinct keys, 16 threads: throughput over one thread's",
     row_ratio("keyed distinct keys: 1 thread / 16 threads, time per check")),
    ("distinct keys, 2 threads: time over governor's", row_ratio("keyed distinct keys, 2 threads: tollgate / governor")),
    ("distinct keys, 16 threads: time over governor's",
     row_ratio("keyed distinct keys, 16 threads: tollgate / governor")),
    ("distinct keys, 16 threads: time over a Mutex<HashMap>'s",
     row_ratio("keyed distinct keys, 16 threads: tollgate / Mutex<HashMap>")),
    ("one hot key, 16 threads, denying: time over governor's",
     row_ratio("keyed hot key, 16 threads: deny, tollgate / governor")),
    ("one hot key, 16 threads, admitting: time over governor's",
     row_ratio("keyed hot key, 16 threads: allow, tollgate / governor")),
    ("1M keys: check_key's time over governor's", row_ratio(KEYED_1M)),
    ("1M keys: check_keys' time over governor's (batches of 64)",
     row_ratio("keyed 1M uniform: tollgate check_keys (batches of 64) / governor")),
    ("1M keys: the minimal replica's time over governor's",
     row_ratio("keyed 1M uniform: minimal replica / governor")),
    ("1M keys: the four-line floor's time over governor's",
     row_ratio("keyed 1M uniform: four-line floor / governor")),
    ("1M keys: check_key's time in dependent reads", row_ratio(DRAM_1M)),
    ("1M keys: governor's time in dependent reads", governor_in_reads),
    ("1M keys, between work: a check's added time over governor's", added_over_governor("1M", "tollgate")),
    ("1M keys, between work: a check's added time over the floor's", added_over_floor("1M")),
    ("1M keys, between work: a check's added time in dependent reads", added_in_reads("tollgate")),
    ("1M keys, between work: governor's added time in dependent reads", added_in_reads("governor")),
    ("1M keys, between work: with prefetch_key, over governor's",
     added_over_governor("1M", "prefetch_key first")),
    ("1M keys, between work: the four-line floor's, over governor's",
     added_over_governor("1M", "four-line floor")),
    ("1M Zipf(1.0) keys: check_key's time over governor's", row_ratio("keyed 1M zipf: tollgate / governor")),
    ("1M String keys: check_key's time over governor's", row_ratio("keyed 1M String keys: tollgate / governor")),
    ("100k keys: check_key's time over governor's", row_ratio("keyed 100k uniform: tollgate / governor")),
    ("100k keys: check_keys' time over governor's (batches of 64)",
     row_ratio("keyed 100k uniform: tollgate check_keys (batches of 64) / governor")),
    ("100k keys: the minimal replica's time over governor's",
     row_ratio("keyed 100k uniform: minimal replica / governor")),
    ("100k keys: a coarse clock's time over the TSC clock's",
     row_ratio("keyed 100k uniform: coarse clock / TSC clock, tollgate")),
    ("100k keys, between work: a check's added time over governor's",
     added_over_governor("100k", "tollgate")),
    ("100k keys, between work: with prefetch_key, over governor's",
     added_over_governor("100k", "prefetch_key first")),
]


def across_report(directory, only, each):
    """Prints, per CPU, the range of each figure in FIGURES over every record under `directory`
    (and its folders): how many records give it, the least, the median and the most. With `only`,
    the figures whose label holds that text; with `each`, every record's value too, by date."""
    paths = sorted(glob.glob(os.path.join(directory, "**", "*.tsv"), recursive=True))
    if not paths:
        sys.exit(f"no records (*.tsv) under {directory}")
    groups = {}
    for path in paths:
        header, rows = read_record(path)
        groups.setdefault(core_of(header), []).append((int(header.get("unix time", "0")), path,
                                                       header.get("commit", "?"), by_name(rows)))
    figures = [(label, figure) for label, figure in FIGURES if not only or only.lower() in label.lower()]
    if not figures:
        sys.exit(f"no figure's label holds {only!r}")
    for core in sorted(groups):
        records = sorted(groups[core], key=lambda record: record[:2])
        print(f"{core}: {len(records)} records")
        for label, figure in figures:
            found = [(when, path, commit, value) for when, path, commit, rows in records
                     if (value := figure(rows)) is not None]
            if not found:
                continue
            values = [value for _, _, _, value in found]
            print(f"  {label:62s} {len(values):3d}  {min(values):6.3f} {statistics.median(values):6.3f} "
                  f"{max(values):6.3f}")
            if each:
                for when, path, commit, value in found:
                    day = datetime.datetime.fromtimestamp(when, datetime.timezone.utc)
                    print(f"      {value:6.3f}  {day:%Y-%m-%d} {commit:13s} "
                          f"{os.path.relpath(path, directory)}")
        print()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--paired", nargs="?", const="latest", metavar="FILE",
                        help="a record of benches/paired.rs (default: the latest)")
    parser.add_argument("--scaling", metavar="DIR",
                        help="a folder of records of one machine: draw how distinct keys scale")
    parser.add_argument("--out", metavar="DIR", help="where the plots go (default: beside the record)")
    parser.add_argument("--across", nargs="?", const=PLOTS,
                        metavar="DIR", help="every record under DIR (default: benches/plots): each "
                        "figure's range per CPU")
    parser.add_argument("--figure", metavar="TEXT", help="with --across: the figures whose label holds TEXT")
    parser.add_argument("--each", action="store_true", help="with --across: every record's value too")
    args = parser.parse_args()
    if args.across is None and (args.figure is not None or args.each):
        # Without --across they would be ignored, and the report printed would not be the one asked for.
        parser.error("--figure and --each go with --across")
    if args.across is not None:
        across_report(args.across, args.figure, args.each)
        return
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
    paired_report(path, args.out)


if __name__ == "__main__":
    main()
