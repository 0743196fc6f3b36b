#!/usr/bin/env bash
# Checks that the loom models have teeth: breaks the keyed table's protocol one way at a time
# (its fence weakened, a rule of an insert's validation skipped, a decision's compare-and-swap
# retried on a word that holds no state of its key: another key's, or a reservation of its own;
# a reset of every key that decides on reservations; an entry judged by the table's own quota
# whatever the tier its word carries; an entry of one generation decided on in another, or
# published after a reconfiguration's walk), the cancel of a reservation (given back with others
# behind it), the release of a layered check's holds (none, or none once another request was
# admitted), a direct limiter's reconfiguration (the state word retired without checking it,
# or taken for a state; a reconfigured limiter deciding with its first quota), and a Redis lease's
# claim (one that leaves the word open to a second claim), runs the models
# that the list below names for that break, and expects every one of them to fail: the list is
# also the record of which model guards which part of the protocol. It works on a copy of the
# working tree in a temporary folder, so the checkout itself is never modified: a commit made
# while it runs cannot pick up a mutant.
#
#   loom-tests/mutants.sh        # about a minute on 2 cores once the models' dependencies are built
#
# Only the named models run for each mutant: a model that passes explores every interleaving,
# which for all of them on every mutant takes several minutes.
#
# Exits non-zero if a mutant survives (a named model missed a broken protocol, or the mutant no
# longer builds) or no longer applies (the code moved: update its pattern). `.ci/run` runs it
# after the models. One change to the protocol is known to pass the models, and is not listed:
# letting no reservation win over another (every inserter kills the others') changes only who
# wins a race, and so progress, which loom's bounded search does not judge.
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
# The sources as they were copied: each mutant starts from them, whatever happens to the checkout.
pristine="$tree/.pristine"
mkdir -p "$pristine"
cp -r "$tree/src" "$pristine/src"

failures=0
# mutant NAME MODELS PERL-SUBSTITUTION [FILE]: applies the substitution to the copy's FILE (the
# table's source unless named), fresh each time, runs the named loom models (space-separated) on
# the copy, and expects every one of them to fail. Naming the models that catch each mutant, rather than running all of them, keeps
# this to about a minute: a model that passes explores every interleaving (the three inserters' for
# 45 seconds), while a failing one stops at its first bad interleaving.
mutant() {
    local name=$1 substitution=$3 original=${4:-src/store/table.rs} models log caught missed=""
    # shellcheck disable=SC2086,SC2116 # one line, the names split at spaces and newlines
    models=$(echo $2)
    local source="$tree/$original"
    # Every file back as it was copied, then this mutant's change.
    (cd "$pristine" && find . -type f -exec cp {} "$tree/{}" \;)
    perl -0pi -e "$substitution" "$source"
    if cmp -s "$source" "$pristine/$original"; then
        echo "NOT APPLIED  $name: its pattern no longer matches $original"
        failures=$((failures + 1))
        return
    fi
    log=$(mktemp)
    # shellcheck disable=SC2086 # one argument per model
    "$tree/loom-tests/run.sh" --exact $models >"$log" 2>&1 || true
    # A model inside the crate is named by its path: its last segment is its name.
    caught=$(grep -E '^test [a-z_0-9:]+ \.\.\. FAILED' "$log" | cut -d' ' -f2 | sed 's/.*:://' | sort || true)
    for model in $models; do
        grep -qx "$model" <<<"$caught" || missed="$missed $model"
    done
    if [ -n "$missed" ]; then
        # A model that passed, or that does not exist, or a mutant that does not build.
        echo "SURVIVED     $name: did not fail:$missed"
        tail -n 30 "$log"
        failures=$((failures + 1))
    else
        echo "caught       $name: by $models"
    fi
    rm -f "$log"
}

mutant "the SeqCst fence before validation weakened to Release" \
    "three_inserts_of_one_key" \
    's/fence\(SeqCst\);(\n\s*if !self\.validate)/fence(crate::sync::Ordering::Release);$1/'
# The two inserters' race needs a fourth preemption to reach the interleaving the fence forbids.
LOOM_MAX_PREEMPTIONS=4 mutant "the SeqCst fence before validation weakened to Release (two inserters)" \
    "inserts_of_one_key_into_different_slots" \
    's/fence\(SeqCst\);(\n\s*if !self\.validate)/fence(crate::sync::Ordering::Release);$1/'
mutant "validation skipped" \
    "inserts_of_one_key_into_different_slots three_inserts_of_one_key" \
    's/(fn validate<W: Wide>\([^)]*\) -> bool \{\n)/${1}        if true { return true; }\n/'
mutant "a live slot of the key elsewhere ignored by validation" \
    "inserts_of_one_key_into_different_slots three_inserts_of_one_key" \
    's/(\/\/ The key is live elsewhere\.\n\s*)return false;/${1}i += 1; continue;/'
mutant "a killed reservation emptied instead of left as a tombstone" \
    "inserts_of_one_key_into_different_slots three_inserts_of_one_key" \
    's/compare_exchange\(slot, word, KILLED\)/compare_exchange(slot, word, 0)/'
mutant "other reservations of the key never killed" \
    "inserts_of_one_key_into_different_slots three_inserts_of_one_key" \
    's/if wide\.compare_exchange\(slot, word, KILLED\)\.is_ok\(\) \{\n(\s*i \+= 1;)\n\s*\}/$1/'
mutant "a decision that retries its compare-and-swap on whatever word it finds (another key's)" \
    "decision_races_its_idle_slot_going_to_another_key_and_back
     decision_races_the_eviction_of_its_slot decision_races_the_reuse_of_its_idle_slot
     reset_of_every_key_races_the_reuse_of_an_idle_slot" \
    's/Err\(actual\) if decides_on\(tag_of\(actual\), tag\) && state_of\(actual\) != RESERVED =>/Err(actual) if true =>/'
mutant "a decision that retries its compare-and-swap on a reservation of its own key (no state yet)" \
    "decision_races_its_idle_slot_going_to_another_key_and_back
     reset_of_every_key_races_a_decision" \
    's/Err\(actual\) if decides_on\(tag_of\(actual\), tag\) && state_of\(actual\) != RESERVED =>/Err(actual) if decides_on(tag_of(actual), tag) && state_of(actual) == RESERVED =>/'
mutant "a reset of every key that decides on reservations too (publishing an insert's slot)" \
    "reset_of_every_key_races_the_reuse_of_an_idle_slot" \
    's/if tag != 0 && state_of\(word\) != RESERVED \{/if tag != 0 {/'
mutant "validation that tells a key's reservations apart by their tiers (whole tags compared)" \
    "inserts_of_one_key_under_two_tiers_into_different_slots" \
    's/if !same_key\(tag_of\(word\), probe\.tag\) \{/if tag_of(word) != probe.tag {/'
mutant "an entry judged by the table's own quota whatever the tier its word carries" \
    "an_evictor_judges_a_racing_tier_request_by_its_class" \
    's/class => self\.rooms\[class\],/_ => self.rooms[0],/'
mutant "an insert that publishes its state in a generation that is over" \
    "an_insert_races_two_keyed_reconfigurations" \
    's/if quotas\.number\(\) != current\.generation \{(\n\s*\/\/ Our fresh state)/if false {$1/'
mutant "a decision that takes an entry of a later generation than its own for one of its own" \
    "a_key_check_races_a_keyed_reconfiguration a_key_cancel_races_a_keyed_reconfiguration" \
    's/if quotas\.number\(\) != current\.generation \{(\n\s*return Generation::Later;)/if false {$1/'
mutant "a reconfiguration's walk that leaves an earlier generation's reservations alone" \
    "an_insert_races_two_keyed_reconfigurations" \
    's/let next = if state == RESERVED \{\n(\s*)KILLED/let next = if state == RESERVED {\n${1}break/'
mutant "a decision that meets an entry of the generation before its own and decides on it as it is" \
    "a_key_check_races_a_keyed_reconfiguration" \
    's/(\) -> bool \{\n)(\s*let mut up_to_date = true;)/$1        return true;\n$2/'
mutant "a decision that retries its compare-and-swap on an entry converted under it" \
    "a_key_check_races_a_keyed_reconfiguration" \
    's/\(stored \^ request\) & \(IDENTITY \| GENERATION\) == 0/(stored ^ request) \& IDENTITY == 0/'

mutant "a cancel that gives back a reservation with others behind it" \
    "a_cancel_races_a_reservation_behind_it a_cancel_races_a_reservation_of_its_key" \
    's/ && state == hold\.after \{/ {/' src/layers/reserve.rs

mutant "a refused layered check that releases nothing it held" \
    "a_refused_check_releases_its_hold a_release_races_an_admission_in_its_gcra_layer
     a_release_races_an_admission_in_its_window_layer" \
    's/(update_in\(hold\.generation, \|state, algorithm\| \{\s*)\(\(\), Sealed::release\(algorithm, state, held, cost, now\)\)/$1((), state)/' src/layers/mod.rs
mutant "a refused layered check that releases nothing it held on a key" \
    "a_refused_layered_check_releases_its_hold_on_a_key" \
    's/let release = \|state\| \(\(\), Sealed::release\(&algorithm, state, held, cost, now\)\);/let release = |state| ((), state);/' src/layers/mod.rs
mutant "a refused reservation over layers that cancels none of its turns" \
    "a_refused_reservation_over_layers_cancels_its_turns" \
    's/self\.cancel_at\(held, holds\[held\]\);/let _ = held;/' src/layers/reserve.rs
mutant "a GCRA release that gives nothing back once another request was admitted" \
    "a_release_races_an_admission_in_its_gcra_layer" \
    's/state\.saturating_sub\(hold\.saturating_sub\(run_into\)\)/state/' src/algorithm/gcra.rs
mutant "a sliding-window release that takes the cost out of nothing" \
    "a_release_races_an_admission_in_its_window_layer" \
    's/self\.pack\(index, prev, cur\.saturating_sub\(cost\)\)/state/' src/algorithm/sliding_window.rs

mutant "a first reconfiguration that retires the state word without checking it is the one it converts" \
    "a_check_races_the_first_reconfiguration a_tightening_races_a_check_of_the_old_burst" \
    's/self\s*\.word\s*\.compare_exchange\(word, MOVED, Release, Relaxed\)/Ok::<u64, u64>(self.word.swap(MOVED, Release))/' src/store/cell.rs
mutant "a decision that takes the retired state word for a state" \
    "a_check_races_the_first_reconfiguration" \
    's/if current == MOVED \{\n(\s*)return self\.update_moved/if false {\n$1return self.update_moved/' src/store/cell.rs
mutant "a decision on a reconfigured limiter judged by the quota it was built with" \
    "checks_race_a_reconfiguration_of_a_moved_limiter a_check_races_two_reconfigurations" \
    's/step\(loaded\.word, &loaded\.algorithm\);\n(\s*)if next == loaded\.word \{\n(\s*)return \(outcome, loaded\.generation/step(loaded.word, &self.first);\n$1if next == loaded.word {\n$2return (outcome, loaded.generation/' src/store/cell.rs
mutant "a lease claim that leaves the word open to another claim" \
    "a_claim_races_spends" \
    's/let claimed = Held \{\n(\s*)renewing: true,/let claimed = Held {\n$1renewing: false,/' src/redis/lease.rs
if [ "$failures" -ne 0 ]; then
    echo "$failures mutant(s) not caught"
    exit 1
fi
echo "every mutant caught"
