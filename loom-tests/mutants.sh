#!/usr/bin/env bash
# Checks that the loom models have teeth: breaks the keyed table's protocol one way at a time
# (one of its three fences weakened or dropped, a rule of an insert's validation skipped, a
# decision's compare-and-swap retried on a word that holds no state of its key: another key's, or
# a reservation of its own; a reset of every key that decides on reservations), runs the models,
# and expects some model to fail. It works on a copy of the working tree in a temporary folder,
# so the checkout itself is never modified: a commit made while it runs cannot pick up a mutant.
#
#   loom-tests/mutants.sh        # about 6 minutes on a 2-core VM (374 s in `.ci/run`)
#
# Exits non-zero if a mutant survives (the models missed a broken protocol) or no longer applies
# (the code moved: update its pattern). `.ci/run` runs it after the models. One change to the
# protocol is known to pass the models, and is not listed: letting no reservation win over another
# (every inserter kills the others') changes only who wins a race, and so progress, which loom's
# bounded search does not judge.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
tree=$(mktemp -d)
# `rm -r` removes the link to the copy's target folder, not what it points to.
trap 'rm -rf "$tree"' EXIT
# The working tree as it is (committed or not), without the build, the history and the fuzzing
# workspace. The copy builds into target/mutants, kept between runs so that the models'
# dependencies are built once, and never into the checkout's own target/loom: cargo names and
# fingerprints a workspace crate by its path inside the workspace, the same in the copy, so a
# mutant's build there would later pass for the checkout's own.
tar -c --exclude=./target --exclude=./.git --exclude=./fuzz . | tar -x -C "$tree"
mkdir -p target/mutants
ln -s "$root/target/mutants" "$tree/target"
original=src/store/table.rs
table="$tree/$original"
# The source as it was copied: each mutant starts from it, whatever happens to the checkout.
pristine="$tree/table.rs.pristine"
cp "$table" "$pristine"

failures=0
# mutant NAME PERL-SUBSTITUTION: applies the substitution to the copy's table source, fresh each
# time, runs every loom model on the copy, and expects a failure.
mutant() {
    local name=$1 substitution=$2 log
    cp "$pristine" "$table"
    perl -0pi -e "$substitution" "$table"
    if cmp -s "$table" "$pristine"; then
        echo "NOT APPLIED  $name: its pattern no longer matches $original"
        failures=$((failures + 1))
        return
    fi
    log=$(mktemp)
    if "$tree/loom-tests/run.sh" >"$log" 2>&1; then
        echo "SURVIVED     $name: every loom model passed"
        failures=$((failures + 1))
    else
        echo "caught       $name: $(grep -E '^test [a-z_0-9]+ \.\.\. FAILED' "$log" | cut -d' ' -f2 | paste -sd' ' -)"
    fi
    rm -f "$log"
}

mutant "the SeqCst fence before validation weakened to Release" \
    's/fence\(SeqCst\);(\n\s*if !self\.validate)/fence(Release);$1/'
mutant "validation skipped" \
    's/(fn validate<W: Wide>\([^)]*\) -> bool \{\n)/${1}        if true { return true; }\n/'
mutant "a live slot of the key elsewhere ignored by validation" \
    's/(\/\/ The key is live elsewhere\.\n\s*)return false;/${1}i += 1; continue;/'
mutant "a killed reservation emptied instead of left as a tombstone" \
    's/compare_exchange\(slot, word, KILLED\)/compare_exchange(slot, word, 0)/'
mutant "other reservations of the key never killed" \
    's/if wide\.compare_exchange\(slot, word, KILLED\)\.is_ok\(\) \{\n(\s*i \+= 1;)\n\s*\}/$1/'
mutant "a decision that retries its compare-and-swap on whatever word it finds (another key's)" \
    's/Err\(actual\) if tag_of\(actual\) == tag && state_of\(actual\) != RESERVED =>/Err(actual) if true =>/'
mutant "a decision that retries its compare-and-swap on a reservation of its own key (no state yet)" \
    's/Err\(actual\) if tag_of\(actual\) == tag && state_of\(actual\) != RESERVED =>/Err(actual) if tag_of(actual) == tag && state_of(actual) == RESERVED =>/'
mutant "a reset of every key that decides on reservations too (publishing an insert's slot)" \
    's/if tag != 0 && state_of\(word\) != RESERVED \{/if tag != 0 {/'
mutant "the release fence after learning a tier dropped" \
    's/(fetch_min\(room, Relaxed\);\n\s*\}\n)\s*fence\(Release\);\n/$1/'
mutant "the acquire fence before an eviction reads the tiers' room dropped" \
    's/\s*fence\(Acquire\);(\n\s*let tier_room)/$1/'

if [ "$failures" -ne 0 ]; then
    echo "$failures mutant(s) not caught"
    exit 1
fi
echo "every mutant caught"
