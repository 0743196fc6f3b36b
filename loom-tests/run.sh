#!/usr/bin/env bash
# Runs tollgate's loom models: every compare-and-swap protocol, under every interleaving loom
# reaches with up to LOOM_MAX_PREEMPTIONS preemptions per thread (default 3).
#
#   loom-tests/run.sh                 # all models: about a minute on 2 cores once built
#   loom-tests/run.sh one_slot        # models whose name contains "one_slot"
#   LOOM_MAX_PREEMPTIONS=5 loom-tests/run.sh    # deeper: several minutes
#   TOLLGATE_LOOM_DEEP=1 loom-tests/run.sh three_inserts    # the three inserters at 3, not 2
#
# The model of three inserters (`three_inserts_of_one_key`) bounds itself at 2 preemptions unless
# TOLLGATE_LOOM_DEEP is set: at 3 it takes most of half an hour. Deeper runs are worth repeating
# after a change to a protocol.
#
# The models build tollgate with `--cfg tollgate_loom` (crate-prefixed, so no other crate in the
# tree switches to its own loom build), in release mode, in a target directory of their own so the
# normal build cache is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
export RUSTFLAGS="--cfg tollgate_loom ${RUSTFLAGS:-}"
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}"
cargo test --no-fail-fast -p tollgate-loom-tests --release --target-dir target/loom -- "$@"
# The lease word of the Redis limiters, whose steps are private: a model inside the crate. It
# runs unless the arguments name models (options aside) and none of them is part of its name.
lease=a_claim_races_spends
run_lease=yes
for arg in "$@"; do
    case $arg in
    -*) ;;
    *) if [[ $lease == *"$arg"* ]]; then run_lease=yes; break; else run_lease=no; fi ;;
    esac
done
if [ $run_lease = yes ]; then
    cargo test -p tollgate --release --target-dir target/loom --features redis --lib -- \
        redis::lease::loom_models
fi
