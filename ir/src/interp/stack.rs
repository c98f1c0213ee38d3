//! Deep-recursion safety. The evaluators recurse once per nested block and
//! once per call; they count that depth and fail with
//! [`ErrorKind::OutOfMemory`](crate::program::ErrorKind::OutOfMemory) beyond
//! [`MAX_DEPTH`], and they run on a thread whose stack holds that depth
//! whatever the caller's stack (test threads have 2 MiB).

use std::sync::Mutex;

/// The deepest nesting of blocks and calls an evaluator accepts (the
/// frontend bounds the nesting of one definition at 256).
pub const MAX_DEPTH: usize = 10_000;

/// The stack size of the evaluation thread (256 MiB): [`MAX_DEPTH`] levels
/// of the interpreter need under 32 MiB in the workspace's dev profile, so
/// this leaves room for larger frames in unoptimised builds. Only the pages
/// touched are ever committed.
pub const STACK_SIZE: usize = 1 << 28;

/// Runs `f` on a fresh thread with a [`STACK_SIZE`] stack and returns its
/// result; runs it on the current thread if no thread can be started. A
/// panic in `f` is propagated.
pub fn with_deep_stack<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    let slot = Mutex::new(Some(f));
    let take = || slot.lock().unwrap_or_else(|e| e.into_inner()).take();
    let spawned = std::thread::scope(|s| {
        let handle = std::thread::Builder::new()
            .name("arrayad-eval".into())
            .stack_size(STACK_SIZE)
            .spawn_scoped(s, || take().map(|f| f()));
        match handle {
            Ok(h) => match h.join() {
                Ok(r) => r,
                Err(panic) => std::panic::resume_unwind(panic),
            },
            Err(_) => None,
        }
    });
    match spawned {
        Some(r) => r,
        // The thread could not be started: `f` is still in the slot.
        None => match take() {
            Some(f) => f(),
            None => unreachable!("the evaluation closure ran but yielded nothing"),
        },
    }
}
