#!/usr/bin/env bash
# Times this working tree's keyed checks against those of another commit, in one process, in
# alternating rounds (benches/ab/harness.rs): a code change measured without the drift between
# runs of a shared machine. Uncommitted changes count as part of the working tree.
#
#   benches/ab.sh 11a8f54                    # every row: 1k, 100k and 1M keys
#   benches/ab.sh HEAD~1 "100k check_key"    # rows whose names contain the filter
#   AB_CHECK=1 benches/ab.sh HEAD            # only check the harness's format, build and lint it (CI)
#   AB_ALIGN=0 benches/ab.sh HEAD            # default code alignment (see below)
#
# Both versions are built as plain library crates (tollgate_base, tollgate_head) under
# target/ab, with the repository's Cargo.lock, in release mode, with every function and every
# block that is not fallen into aligned to 64 bytes (AB_ALIGN=0: default flags).
#
# Why aligned: each version's check is inlined into the closures that time it, so the two sides'
# hot loops are code of their own at different addresses, and where a loop falls against the CPU's
# fetch and decode boundaries can move its time by several percent whatever the code (the
# unchanged tree timed against itself gave up to 0.86 with default flags, 0.98-1.05 aligned).
# Run `benches/ab.sh HEAD` on a clean tree first: what it gives is the method's error on that
# machine.
set -euo pipefail
base=${1:?usage: benches/ab.sh COMMIT [FILTER...]}
shift
root=$(cd "$(dirname "$0")/.." && pwd)
work="$root/target/ab"
rm -rf "$work/base" "$work/head" "$work/harness"
mkdir -p "$work/base" "$work/head" "$work/harness/src"
git -C "$root" archive "$base" src Cargo.toml | tar -x -C "$work/base"
(cd "$root" && tar -c src Cargo.toml) | tar -x -C "$work/head"
for side in base head; do
    # Keep [package] (renamed), [dependencies] and the loom target's: drop the workspace, the
    # dev-dependencies, the benches and the profiles, which only the repository needs.
    python3 - "$work/$side/Cargo.toml" "$side" <<'PY'
import re, sys
path, side = sys.argv[1], sys.argv[2]
keep, out = True, []
for line in open(path):
    header = re.match(r"\s*\[\[?([^\]]+)\]\]?", line)
    if header:
        keep = header.group(1) in ("package", "features", "dependencies", "lints.rust") or "tollgate_loom" in line
    if keep:
        out.append(line)
text = "".join(out).replace('name = "tollgate"', f'name = "tollgate_{side}"', 1)
open(path, "w").write(text)
PY
done
# The harness shares the benches' support module, which needs portable-atomic; governor is the
# dev-dependency of the repository, at the version its Cargo.lock holds.
governor=$(sed -n 's/^governor = \(.*\)$/\1/p' "$root/Cargo.toml")
portable_atomic=$(sed -n 's/^portable-atomic = \(.*\)$/\1/p' "$root/Cargo.toml")
cat > "$work/harness/Cargo.toml" <<TOML
[package]
name = "tollgate-ab"
version = "0.0.0"
edition = "2021"
publish = false

[workspace]

[dependencies]
tollgate_base = { path = "../base" }
tollgate_head = { path = "../head" }
governor = $governor
portable-atomic = $portable_atomic

[lints.rust]
unexpected_cfgs = { level = "warn", check-cfg = ["cfg(tollgate_loom)"] }

[profile.release]
debug = true
TOML
cp "$root/benches/ab/harness.rs" "$work/harness/src/main.rs"
cp -r "$root/benches/support" "$work/harness/src/support"
# support/wide.rs compiles the crate's own slot operations from ../../src/sync (this tree's).
cp -r "$root/src/sync" "$work/harness/src/sync"
cp "$root/Cargo.lock" "$work/harness/Cargo.lock"
cd "$work/harness"
echo "head: working tree at $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD || echo ' (modified)'); base: $(git -C "$root" rev-parse --short "$base")"
if [ "${AB_CHECK:-}" = 1 ]; then
    cargo fmt --check
    cargo clippy --release --quiet --target-dir "$work/target" -- -D warnings
    exit
fi
if [ "${AB_ALIGN:-1}" != 0 ]; then
    align="-C llvm-args=-align-all-functions=6 -C llvm-args=-align-all-nofallthru-blocks=6"
    export RUSTFLAGS="${RUSTFLAGS:-} $align"
fi
cargo run --release --quiet --target-dir "$work/target" -- "$@"
