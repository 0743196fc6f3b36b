#!/usr/bin/env bash
# The benchmarks and threaded tests that need more cores than a 2-vCPU VM, for a many-core
# machine lent for minutes: built here, run there, where there is no Rust toolchain.
#
#   benches/lent.sh pack              # here: build the paired bench and the release test
#                                     # binaries into target/lent (carry that folder)
#   benches/lent.sh contention        # there: distinct keys, one hot key and one limiter from
#                                     # 2 threads to every core, against governor, the floors
#                                     # and a Mutex<HashMap>, with the busy-core rows (about 5
#                                     # minutes on 16 cores)
#   benches/lent.sh single            # there: every single-thread row of the README's table,
#                                     # then the release tests once and their threaded ones in a
#                                     # loop for a minute, then checks between other work (about
#                                     # 7.5 minutes on 16 cores)
#   benches/lent.sh keyed             # there: the one-thread keyed rows alone (1M and 100k
#                                     # keys against governor, the floors and DRAM), then checks
#                                     # between other work: for a short lease (about 3.5 minutes
#                                     # on 16 cores)
#
# Each part runs under a time limit, in order of what matters most, so that a call stops inside
# its lease with what it has. Rows run in fewer rounds than the 41 of a full run (21, or 15 where
# a row is slow under contention; `TOLLGATE_PAIRED_ROUNDS`): the medians hold, the interquartile
# ranges widen. The output and every record of a row go to $OUT (or target/lent/out), for
# `benches/report.py --paired FILE` and, with the records of one machine in one folder,
# `benches/report.py --scaling DIR`. LENT_ROUNDS=5 makes a quick dry run here.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lent="$root/target/lent"
out=${OUT:-$lent/out}

# Rows of benches/paired.rs: `rows SECONDS ROUNDS FILTER...`, the run's records copied to $out.
rows() {
    local seconds=$1 rounds=${LENT_ROUNDS:-$2}
    shift 2
    echo "== rows: $* ($rounds rounds, at most $seconds s) $(date +%T)"
    # The records name the commit the bench was built at, which `pack` wrote down: the copy of
    # the tree on a lent machine has been seen to name another.
    TOLLGATE_COMMIT=$(cat "$lent/commit") TOLLGATE_PAIRED_ROUNDS=$rounds \
        timeout "$seconds" "$lent/paired" "$@" | tee "$out/rows.txt"
    echo "== exit ${PIPESTATUS[0]} $(date +%T)"
    # The bench names its record on its second line: "rows recorded in PATH".
    local record
    record=$(sed -n 's/^rows recorded in //p' "$out/rows.txt")
    [ -n "$record" ] && [ -f "$record" ] && cp "$record" "$out/"
    rm -f "$out/rows.txt"
}

case ${1:-} in
pack)
    rm -rf "$lent"
    mkdir -p "$lent/tests"
    cd "$root"
    executables() {
        python3 -c '
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    if message.get("reason") == "compiler-artifact" and message.get("executable"):
        print(message["target"]["name"], message["executable"])'
    }
    cargo bench --bench paired --no-run --message-format=json | executables |
        while read -r name path; do strip -o "$lent/$name" "$path"; done
    cargo test --release --tests --no-run --message-format=json | executables |
        while read -r name path; do strip -o "$lent/tests/$name" "$path"; done
    git describe --always --dirty --abbrev=7 >"$lent/commit"
    du -sh "$lent"
    echo "carry target/lent; there, run benches/lent.sh contention, then benches/lent.sh single"
    ;;
contention)
    mkdir -p "$out"
    {
        lscpu
        nproc
        uname -r
    } >"$out/host.txt" 2>&1
    {
        # About 130 s and 90 s on 16 cores.
        rows 200 21 "keyed distinct"
        rows 180 15 "keyed hot key"
        # "allow, N threads" names the one-limiter rows alone (the keyed ones say "key, N").
        # The thread counts of paired.rs: 2, each power of two up to the CPUs, and their count.
        filters=() threads=2
        while [ "$threads" -le "$(nproc)" ]; do
            filters+=("allow, $threads threads")
            threads=$((threads * 2))
        done
        [ $((threads / 2)) -ne "$(nproc)" ] && filters+=("allow, $(nproc) threads")
        rows 110 15 "${filters[@]}"
    } 2>&1 | tee "$out/contention.txt"
    ;;
single)
    mkdir -p "$out"
    {
        rows 240 21 "allow: tollgate gcra / " "deny:  tollgate gcra / governor" \
            "deny / allow: tollgate gcra" "keyed 1M uniform: tollgate / governor" \
            "keyed 1M uniform: tollgate check_keys" "keyed 1M uniform: tollgate / one DRAM" \
            "keyed 1M uniform: decide_keys" \
            "keyed 1M zipf: t" "keyed 1M String keys: tollgate / governor" \
            "keyed 100k uniform: t" "keyed 100k uniform: two-line floor / governor" \
            "keyed 100k uniform: decide_key" "keyed 100k uniform: check_keys (batches" \
            "keyed 100k zipf" "keyed 1k uniform: tollgate / governor"
        cd "$lent/tests" || exit 1
        echo "== every release test binary once $(date +%T)"
        for test in *; do
            echo "-- $test"
            timeout 60 "./$test" -q 2>&1 | grep -E "test result|FAIL|panicked|failed"
        done
        echo "== the threaded tests in a loop for 60 s $(date +%T)"
        end=$((SECONDS + 60)) rounds=0 failures=0
        while [ $SECONDS -lt $end ]; do
            for run in "stress" "sliding_log threads_get_exact_counts" \
                "keyed many_threads batches_from_many_threads a_reset_of_every_key_racing limited_keys_survive"; do
                # shellcheck disable=SC2086 # the test names are separate arguments
                if ! ./$run -q >"$out/last-test.txt" 2>&1; then
                    failures=$((failures + 1))
                    # The first three failures' output (a call brings back 8 files at most).
                    [ $failures -le 3 ] && cp "$out/last-test.txt" "$out/failure-$failures.txt"
                fi
            done
            rounds=$((rounds + 1))
        done
        rm -f "$out/last-test.txt"
        echo "== $rounds rounds of the threaded tests, $failures failures $(date +%T)"
        # Last, what a check adds to a request that does other work between checks (about 150 s).
        rows 300 15 "keyed 1M uniform: between other work" "keyed 100k uniform: between other work"
    } 2>&1 | tee "$out/single.txt"
    ;;
keyed)
    mkdir -p "$out"
    {
        lscpu
        nproc
        uname -r
    } >"$out/host.txt" 2>&1
    {
        rows 120 15 "keyed 1M uniform: tollgate / " "keyed 100k uniform: tollgate / "
        rows 300 15 "keyed 1M uniform: between other work" "keyed 100k uniform: between other work"
    } 2>&1 | tee "$out/keyed.txt"
    ;;
*)
    # The usage: the comment block at the top of this file, whatever its length.
    sed -n '2,/^[^#]/p' "$0" | sed '$d'
    exit 2
    ;;
esac
