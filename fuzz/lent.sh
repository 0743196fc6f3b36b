#!/usr/bin/env bash
# The fuzz targets on a many-core machine lent for minutes, which has no Rust toolchain: built
# here under the address sanitizer, run there on every core at once.
#
#   fuzz/lent.sh pack          # here: build the three targets with ASan (RUSTC_BOOTSTRAP=1),
#                              # strip them, and pack them with the corpora into target/lent-fuzz
#                              # (carry that folder; about 16 MB)
#   fuzz/lent.sh run [SECONDS] # there: every target at once in libFuzzer's fork mode, the cores
#                              # shared out (half to `keyed`, three eighths to `algorithms`, the
#                              # rest to `quota`), each for SECONDS (default 420)
#
# Each target's log, its grown corpus (packed) and any failing input go to $OUT (or
# target/lent-fuzz/out). A failing input is replayed here, from fuzz/, under the same sanitizer:
# `RUSTC_BOOTSTRAP=1 cargo fuzz run TARGET FILE`.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
lent="$root/target/lent-fuzz"
out=${OUT:-$lent/out}
targets=(keyed algorithms quota)

case ${1:-} in
pack)
    set -e
    rm -rf "$lent"
    mkdir -p "$lent/lib"
    cd "$root/fuzz"
    RUSTC_BOOTSTRAP=1 cargo fuzz build
    for target in "${targets[@]}"; do
        strip -o "$lent/$target" "target/x86_64-unknown-linux-gnu/release/$target"
    done
    # libFuzzer is C++: in case the lent machine lacks the runtime, bring this one's.
    for library in libstdc++.so.6 libgcc_s.so.1; do
        cp -L "$(ldd "$lent/keyed" | awk -v l="$library" '$1 == l { print $3 }')" "$lent/lib/"
    done
    mkdir -p corpus
    tar czf "$lent/corpus.tgz" corpus
    git -C "$root" describe --always --dirty --abbrev=7 >"$lent/commit"
    du -sh "$lent"
    echo "carry target/lent-fuzz; there, run fuzz/lent.sh run"
    ;;
run)
    seconds=${2:-420}
    mkdir -p "$out" "$lent/work"
    cd "$lent/work"
    tar xzf "$lent/corpus.tgz"
    # The carried runtime only where the machine's own is missing.
    if ldd "$lent/keyed" | grep -q "not found"; then
        export LD_LIBRARY_PATH="$lent/lib"
    fi
    cpus=$(nproc)
    # At least one job each (a fork count of 0 is libFuzzer's plain mode).
    declare -A jobs=([keyed]=$((cpus / 2)) [algorithms]=$((cpus * 3 / 8)))
    jobs[quota]=$((cpus - jobs[keyed] - jobs[algorithms]))
    for target in "${targets[@]}"; do
        [ "${jobs[$target]}" -ge 1 ] || jobs[$target]=1
    done
    echo "commit $(cat "$lent/commit"), $cpus CPUs, $seconds s per target, $(date +%T)" |
        tee "$out/summary.txt"
    for target in "${targets[@]}"; do
        mkdir -p "corpus/$target"
        echo "$target: $(find "corpus/$target" -type f | wc -l) inputs, ${jobs[$target]} jobs" |
            tee -a "$out/summary.txt"
        # Fork mode shares what each job finds, and stops at the first failure (its default).
        timeout $((seconds + 60)) "$lent/$target" "corpus/$target" -fork="${jobs[$target]}" \
            -max_total_time="$seconds" -timeout=10 -artifact_prefix="$out/$target-" \
            >"$out/$target.log" 2>&1 &
    done
    wait
    for target in "${targets[@]}"; do
        # fork mode's last progress line: total executions, coverage, crashes so far.
        echo "$target: $(grep -E '^#[0-9]+' "$out/$target.log" | tail -1)" | tee -a "$out/summary.txt"
        grep -m3 -E "ERROR|panicked|deadly signal|SUMMARY" "$out/$target.log" | tee -a "$out/summary.txt"
        echo "  corpus now $(find "corpus/$target" -type f | wc -l) inputs" | tee -a "$out/summary.txt"
    done
    tar czf "$out/corpus.tgz" corpus
    echo "done $(date +%T)" | tee -a "$out/summary.txt"
    ;;
*)
    sed -n '2,/^[^#]/p' "$0" | sed '$d'
    exit 2
    ;;
esac
