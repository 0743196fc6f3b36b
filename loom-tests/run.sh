#!/usr/bin/env bash
# Runs tollgate's loom models: every compare-and-swap protocol, under every interleaving loom
# reaches with up to LOOM_MAX_PREEMPTIONS preemptions per thread (default 3).
#
#   loom-tests/run.sh                 # all models
#   loom-tests/run.sh one_slot        # models whose name contains "one_slot"
#   LOOM_MAX_PREEMPTIONS=5 loom-tests/run.sh    # deeper: about 7 minutes on a 2-core VM
#   TOLLGATE_LOOM_DEEP=1 loom-tests/run.sh three_inserts    # the three inserters at 3, not 2
#
# CI runs the default, 3: about 50 seconds of models once built, 45 of them the model of three
# inserters (`three_inserts_of_one_key`), which bounds itself at 2 preemptions unless
# TOLLGATE_LOOM_DEEP is set (at 3 it passed in 24 minutes on 2026-11-24). Runs at 4 and 5
# preemptions passed too (2026-11-23: 30 s and 141 s for the keyed models; at 5, with the
# eviction model added, 203 s; 2026-11-24, at 5, with tombstones for killed reservations and the
# three-inserters model at 2, 173 s; 2026-11-27, at 5, the 13 keyed models, with the tier's, the
# idle slot's round trip and the five resets' added since, and the three inserters again at 2,
# 399 s), and are worth repeating after a change to a protocol.
#
# The models build tollgate with `--cfg tollgate_loom` (crate-prefixed, so no other crate in the
# tree switches to its own loom build), in release mode, in a target directory of their own so the
# normal build cache is left alone.
set -euo pipefail
cd "$(dirname "$0")/.."
export RUSTFLAGS="--cfg tollgate_loom ${RUSTFLAGS:-}"
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-3}"
exec cargo test -p tollgate-loom-tests --release --target-dir target/loom -- "$@"
