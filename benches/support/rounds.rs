//! Alternating rounds: how the paired comparisons (`paired.rs`, and `ab/harness.rs` for
//! `ab.sh`) time A against B, so that the drift of a shared, noisy machine cancels out. Each
//! round times A and then B (the order alternates between rounds) over the same number of calls,
//! and the figure reported is the median of the per-round ratios, with the spread of the middle
//! half.

use std::fs::File;
use std::hint::black_box;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

/// Rounds per comparison, unless `TOLLGATE_PAIRED_ROUNDS` asks for fewer or more.
pub const ROUNDS: usize = 41;

/// Rounds per comparison in this run: [`ROUNDS`], or an odd number of at least 5 from the
/// environment variable `TOLLGATE_PAIRED_ROUNDS`, for a run that must fit a short lease of a
/// bigger machine (fewer rounds give a median as central but a wider interquartile range).
/// Anything else there stops the run with a message rather than running a different count
/// than the one asked for.
pub fn rounds() -> usize {
    static ROUNDS_IN_RUN: OnceLock<usize> = OnceLock::new();
    *ROUNDS_IN_RUN.get_or_init(|| match std::env::var("TOLLGATE_PAIRED_ROUNDS") {
        Err(std::env::VarError::NotPresent) => ROUNDS,
        Ok(value) => match value.parse::<usize>() {
            Ok(n) if n >= 5 && n % 2 == 1 => n,
            _ => panic!("TOLLGATE_PAIRED_ROUNDS={value:?}: give an odd number of at least 5"),
        },
        Err(error) => panic!("TOLLGATE_PAIRED_ROUNDS: {error}"),
    })
}

/// Calls per measurement: each round times `CALLS` calls of A and as many of B.
pub const CALLS: u64 = 2_000_000;

/// Nanoseconds per call of `f`, over `CALLS` calls.
pub fn time<F: FnMut() -> bool>(f: &mut F) -> f64 {
    let start = Instant::now();
    for _ in 0..CALLS {
        black_box(f());
    }
    start.elapsed().as_nanos() as f64 / CALLS as f64
}

/// The median of `v` (sorted in place).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Prints `name`: the median times of A and B and the median A/B ratio, with its interquartile
/// range. `a` and `b` each run one measurement and return nanoseconds per call.
pub fn paired(name: &str, mut a: impl FnMut() -> f64, mut b: impl FnMut() -> f64) {
    if !selected(name) {
        return;
    }
    ROWS_RUN.store(true, Ordering::Relaxed);
    // Warm both up (caches, branch predictors, CPU frequency).
    a();
    b();
    let (mut ta, mut tb, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
    let rounds = rounds();
    for round in 0..rounds {
        let (x, y) = if round % 2 == 0 {
            let x = a();
            (x, b())
        } else {
            let y = b();
            (a(), y)
        };
        ta.push(x);
        tb.push(y);
        ratios.push(x / y);
    }
    let (ma, mb) = (median(&mut ta), median(&mut tb));
    let r = median(&mut ratios);
    let (q1, q3) = (ratios[rounds / 4], ratios[3 * rounds / 4]);
    println!("{name:44} {ma:7.2} ns vs {mb:7.2} ns   ratio {r:5.3}  (IQR {q1:5.3} .. {q3:5.3})");
    write_row(name, [ma, mb, r, q1, q3]);
}

/// Prints and records a row that is counted, not timed (bytes per key): `a` and `b` in the time
/// fields, their ratio for the median and both quartiles.
pub fn counted(name: &str, a: f64, b: f64) {
    if !selected(name) {
        return;
    }
    ROWS_RUN.store(true, Ordering::Relaxed);
    let r = a / b;
    println!("{name:44} {a:7.2} B  vs {b:7.2} B    ratio {r:5.3}");
    write_row(name, [a, b, r, r, r]);
}

/// Writes one row to the run's record, if it has one: one write per row, so that a run stopped
/// half way leaves every row it printed.
fn write_row(name: &str, [a, b, r, q1, q3]: [f64; 5]) {
    if let Some(record) = RECORD.get() {
        let row = format!("{name}\t{a:.3}\t{b:.3}\t{r:.4}\t{q1:.4}\t{q3:.4}\n");
        (&*record.lock().unwrap())
            .write_all(row.as_bytes())
            .expect("writing the run's record");
    }
}

/// The file that [`paired`] also writes each row to, once [`record_to`] has named it.
static RECORD: OnceLock<Mutex<File>> = OnceLock::new();

/// Makes [`paired`] write each row to `path` too, as a line of tab-separated fields (the name,
/// the median times of A and B in nanoseconds, the median ratio and its quartiles), after
/// `header` (lines that say which run this is, each written as a `#` comment). For
/// `benches/report.py --paired`, which prints a run's rows and draws its plots.
pub fn record_to(path: &Path, header: &[String]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut file = File::create(path)?;
    for line in header {
        writeln!(file, "# {line}")?;
    }
    writeln!(file, "# name\ta_ns\tb_ns\tratio\tq1\tq3")?;
    RECORD
        .set(Mutex::new(file))
        .map_err(|_| std::io::Error::other("a run is recorded to one file"))
}

/// The filters given on the command line: its arguments but cargo's own flags (`--bench`).
pub fn filters() -> Vec<String> {
    std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect()
}

/// The rows of the README's table, which the filter `readme` selects.
pub const README_ROWS: [&str; 13] = [
    "allow: tollgate gcra / governor",
    "allow: tollgate gcra / floor (clock + CAS)",
    "deny:  tollgate gcra / governor",
    "keyed 1M uniform: tollgate / governor",
    "keyed 1M uniform: tollgate check_keys (batches of 64) / governor",
    "keyed 1M uniform: tollgate / one DRAM access",
    "keyed 100k uniform: tollgate / governor",
    "keyed 100k uniform: tollgate / four-line floor",
    "keyed distinct keys, 2 threads: tollgate / governor",
    "keyed distinct keys: 1 thread / 2 threads, time per check",
    "memory per key held, 1M u64 keys: tollgate / governor",
    "memory per key held, 1M IpAddr keys: tollgate / governor",
    "memory per key held, 1M String keys: tollgate / governor",
];

/// Whether `name` matches a filter given on the command line (`cargo bench --bench paired --
/// keyed` runs the comparisons whose names contain "keyed"; `readme`, the rows of the README's
/// table); everything without one.
pub fn selected(name: &str) -> bool {
    let filters = filters();
    filters.is_empty()
        || filters.iter().any(|f| {
            name.contains(f.as_str())
                || (f == "readme" && README_ROWS.iter().any(|r| r.starts_with(name)))
        })
}

/// Whether a filter may select rows of the section whose rows are all named `prefix: ...`:
/// one that [`selected`] finds in the prefix (`keyed 100k`), or one that names a row of it
/// whole or in part from the prefix on (`keyed 100k uniform: coarse`). A section that builds
/// its limiters before its rows asks this first, so that a run of other rows skips the build.
pub fn section_selected(prefix: &str) -> bool {
    selected(prefix) || filters().iter().any(|f| f.starts_with(prefix))
}

/// Whether [`paired`] has timed a row in this run.
pub fn any_row_run() -> bool {
    ROWS_RUN.load(Ordering::Relaxed)
}

static ROWS_RUN: AtomicBool = AtomicBool::new(false);

/// Nanoseconds per check over `CALLS` checks of the keys in `keys`, continuing at `*at`.
pub fn time_keys(keys: &[u64], at: &mut usize, mut check: impl FnMut(u64) -> bool) -> f64 {
    time(&mut || {
        let key = keys[*at];
        *at = (*at + 1) % keys.len();
        check(key)
    })
}

/// Nanoseconds per check over `CALLS` checks of the keys in `keys`, in batches of `batch`
/// consecutive keys handed to `decide` (a batched call), continuing at `*at`.
pub fn time_batches(
    keys: &[u64],
    at: &mut usize,
    batch: usize,
    mut decide: impl FnMut(&[u64]),
) -> f64 {
    let start = Instant::now();
    let mut done = 0;
    while done < CALLS {
        if *at + batch > keys.len() {
            *at = 0;
        }
        decide(&keys[*at..*at + batch]);
        *at += batch;
        done += batch as u64;
    }
    start.elapsed().as_nanos() as f64 / done as f64
}
