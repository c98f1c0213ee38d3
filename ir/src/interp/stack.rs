//! Deep-recursion safety. The evaluators recurse once per nested block and
//! once per call; they count that depth and fail with
//! [`ErrorKind::OutOfMemory`](crate::program::ErrorKind::OutOfMemory) beyond
//! [`MAX_DEPTH`], and they run on a thread whose stack holds that depth
//! whatever the caller's stack (test threads have 2 MiB).

/// The deepest nesting of blocks and calls an evaluator accepts (the
/// frontend bounds the nesting of one definition at 256).
pub const MAX_DEPTH: usize = 10_000;

/// The stack size of the evaluation thread (256 MiB): [`MAX_DEPTH`] levels
/// of the interpreter need under 32 MiB in the workspace's dev profile, so
/// this leaves room for larger frames in unoptimised builds. Only the pages
/// touched are ever committed.
pub const STACK_SIZE: usize = 1 << 28;

/// Runs `f` on a fresh thread with a [`STACK_SIZE`] stack
/// ([`crate::stack::on_big_stack`]) and returns its result; runs it on the
/// current thread if no thread can be started. A panic in `f` is
/// propagated.
pub fn with_deep_stack<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    match crate::stack::on_big_stack("arrayad-eval", STACK_SIZE, f) {
        Ok(r) => r,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}
