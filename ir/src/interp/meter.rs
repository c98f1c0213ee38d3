//! The memory limit of an interpreter run, as the compiled code has one
//! (the arena and tape limit, `--max-memory`, `ARRAYAD_MAX_MEMORY`): the
//! bytes of array storage and tape alive in the run are counted, and an
//! allocation that would take them beyond the limit fails with the
//! out-of-memory error at its statement.
//!
//! A run is single-threaded, on its own thread ([`super::stack`]): the
//! count is a thread-local, set up by [`with_limit`] around the run.
//! Storage is counted when an array is made ([`add`]) and released when
//! its buffer is dropped ([`release`]); the fallible allocations of array
//! storage ask [`fits`] first.

use std::cell::Cell;

thread_local! {
    /// The bytes counted alive in this thread's run.
    static LIVE: Cell<u64> = const { Cell::new(0) };
    /// The limit of this thread's run (`None`: no limit).
    static LIMIT: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Restores the count and limit of an enclosing run (or none), also when
/// the run unwinds.
struct Restore(u64, Option<u64>);

impl Drop for Restore {
    fn drop(&mut self) {
        LIVE.with(|l| l.set(self.0));
        LIMIT.with(|l| l.set(self.1));
    }
}

/// Runs `f` with a count starting at 0 and `limit` (bytes; `None`: none).
pub(crate) fn with_limit<R>(limit: Option<u64>, f: impl FnOnce() -> R) -> R {
    let _restore = Restore(LIVE.with(|l| l.replace(0)), LIMIT.with(|l| l.replace(limit)));
    f()
}

/// True when `bytes` more stay within the limit.
pub(crate) fn fits(bytes: u64) -> bool {
    LIMIT.with(Cell::get).is_none_or(|limit| LIVE.with(Cell::get).checked_add(bytes).is_some_and(|t| t <= limit))
}

/// Counts `bytes` as alive.
pub(crate) fn add(bytes: u64) {
    LIVE.with(|l| l.set(l.get().saturating_add(bytes)));
}

/// Counts `bytes` as released.
pub(crate) fn release(bytes: u64) {
    LIVE.with(|l| l.set(l.get().saturating_sub(bytes)));
}

/// The limit of the current run, if any.
pub(crate) fn limit() -> Option<u64> {
    LIMIT.with(Cell::get)
}
