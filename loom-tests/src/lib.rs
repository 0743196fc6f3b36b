//! Loom models live in `tests/`; this crate exists to build tollgate with `--cfg tollgate_loom`.
