//! Work on a thread with a large stack.
//!
//! The compiler recurses over the nesting of the program (the frontend over
//! expressions, differentiation and code generation over blocks, the
//! evaluators over blocks and calls). Each of those bounds its depth and
//! runs on a thread whose stack holds that depth whatever the caller's
//! (a spawned Rust thread has 2 MiB): [`on_big_stack`] (one thread) and
//! [`for_each_parallel`] (helper threads for independent work) are the
//! places such threads are made. Only the stack pages used are ever
//! touched.

use std::any::Any;
use std::sync::Mutex;

/// A caught panic: the payload `std::panic::catch_unwind` gives.
pub type Panic = Box<dyn Any + Send>;

/// Runs `f` on a new thread called `name` with a stack of `stack_size`
/// bytes and returns its result, or the payload of its panic (a bug: the
/// caller reports it with [`panic_message`], or resumes it). When no
/// thread can be started, `f` runs on the calling thread instead.
pub fn on_big_stack<R: Send>(name: &str, stack_size: usize, f: impl FnOnce() -> R + Send) -> Result<R, Panic> {
    let slot = Mutex::new(Some(f));
    // A poisoned lock only means a panic while the closure was taken.
    let take = || slot.lock().unwrap_or_else(|e| e.into_inner()).take();
    let run = || take().map(|f| std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)));
    let outcome = std::thread::scope(|s| {
        match std::thread::Builder::new().name(name.into()).stack_size(stack_size).spawn_scoped(s, run) {
            Ok(handle) => handle.join().unwrap_or_else(|panic| Some(Err(panic))),
            Err(_) => None,
        }
    });
    match outcome {
        Some(result) => result,
        // The thread could not be started: `f` is still in the slot.
        None => match run() {
            Some(result) => result,
            None => Err(Box::new("the work given to a big-stack thread did not run")),
        },
    }
}

/// The stack of a thread that compiles (the driver's, and each helper
/// thread of [`for_each_parallel`] that optimises or generates code): the
/// passes recurse over the nesting of blocks, which inlining bounds. Only
/// the pages used are touched.
pub const COMPILER_STACK: usize = 256 << 20;

/// The number of threads the compiler works on: `$ARRAYAD_NUM_THREADS`
/// when it is a positive integer, else the number of cores the process
/// may use.
pub fn threads() -> usize {
    let from_env = std::env::var("ARRAYAD_NUM_THREADS").ok().and_then(|v| v.trim().parse::<usize>().ok());
    match from_env {
        Some(n) if n > 0 => n,
        _ => cores(),
    }
}

/// The number of cores the process may use, asked of the system once (it
/// reads the cgroup's quota from files: too slow to ask per function).
fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1))
}

thread_local! {
    /// Whether this thread runs items of a [`for_each_parallel`] that
    /// started threads: a nested one then runs its items here rather than
    /// multiply the threads (and their stacks).
    static IN_PARALLEL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with the thread-local `flag` set, restoring its value after,
/// panic or not (it matters where work runs on the caller's thread).
pub fn with_thread_flag<R>(flag: &'static std::thread::LocalKey<std::cell::Cell<bool>>, f: impl FnOnce() -> R) -> R {
    struct Reset(&'static std::thread::LocalKey<std::cell::Cell<bool>>, bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            let was = self.1;
            self.0.with(|c| c.set(was));
        }
    }
    let _reset = Reset(flag, flag.with(|c| c.replace(true)));
    f()
}

/// Runs `f` on every item of `items`, on up to [`threads`] threads with
/// stacks of `stack_size` bytes (each taking the next item in order), or
/// here when there is one item or one thread or no thread can be started,
/// or when this thread already runs the items of another
/// `for_each_parallel` (so nested parallel work never holds more than
/// [`threads`] threads). A panic of `f` is resumed on the calling thread
/// once every thread has ended (the first one, in the order of the items).
pub fn for_each_parallel<T: Send>(items: Vec<T>, stack_size: usize, f: impl Fn(T) + Sync) {
    let n = threads().min(items.len());
    if n <= 1 || IN_PARALLEL.with(std::cell::Cell::get) {
        items.into_iter().for_each(f);
        return;
    }
    let queue = Mutex::new(items.into_iter().enumerate());
    let next = || queue.lock().unwrap_or_else(|e| e.into_inner()).next();
    let panics: Mutex<Vec<(usize, Panic)>> = Mutex::new(Vec::new());
    let work = || {
        with_thread_flag(&IN_PARALLEL, || {
            while let Some((k, item)) = next() {
                if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(item))) {
                    panics.lock().unwrap_or_else(|e| e.into_inner()).push((k, p));
                }
            }
        })
    };
    std::thread::scope(|s| {
        for _ in 1..n {
            // A thread that cannot be started leaves its items to the others.
            let _ =
                std::thread::Builder::new().name("arrayad-work".into()).stack_size(stack_size).spawn_scoped(s, work);
        }
        // This thread takes items too (the compiler's callers run on its
        // big-stack thread).
        work();
    });
    let mut panics = panics.into_inner().unwrap_or_else(|e| e.into_inner());
    panics.sort_by_key(|(k, _)| *k);
    if let Some((_, p)) = panics.into_iter().next() {
        std::panic::resume_unwind(p);
    }
}

/// The message of a panic payload (`&str` or `String`, else "unknown
/// panic").
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_and_panic_come_back() {
        assert_eq!(on_big_stack("t", 1 << 20, || 41 + 1).ok(), Some(42));
        let p = on_big_stack("t", 1 << 20, || -> u32 { panic!("boom {}", 7) }).err().map(|p| panic_message(&*p));
        assert_eq!(p.as_deref(), Some("boom 7"));
    }

    #[test]
    fn parallel_work_runs_every_item_and_resumes_the_first_panic() {
        let sum = std::sync::atomic::AtomicUsize::new(0);
        for_each_parallel((1..=100).collect(), 1 << 20, |k: usize| {
            sum.fetch_add(k, std::sync::atomic::Ordering::Relaxed);
        });
        assert_eq!(sum.into_inner(), 5050);
        let p = std::panic::catch_unwind(|| {
            for_each_parallel(vec![1, 2, 3], 1 << 20, |k: u32| {
                if k >= 2 {
                    panic!("item {k}");
                }
            })
        });
        assert_eq!(p.err().map(|p| panic_message(&*p)).as_deref(), Some("item 2"));
    }

    #[test]
    fn nested_parallel_work_runs_on_the_threads_already_started() {
        // Each outer item runs an inner `for_each_parallel`; with the outer
        // one on several threads, the inner ones run where they are called.
        let ids = Mutex::new(std::collections::HashSet::new());
        let sum = std::sync::atomic::AtomicUsize::new(0);
        for_each_parallel((0..4).collect(), 1 << 20, |_: usize| {
            for_each_parallel((1..=10).collect(), 1 << 20, |k: usize| {
                sum.fetch_add(k, std::sync::atomic::Ordering::Relaxed);
                ids.lock().unwrap_or_else(|e| e.into_inner()).insert(std::thread::current().id());
                // Slow enough that a helper of an inner call, were one
                // started, would take items too.
                std::thread::sleep(std::time::Duration::from_millis(1));
            });
        });
        assert_eq!(sum.into_inner(), 4 * 55);
        let ids = ids.into_inner().unwrap_or_else(|e| e.into_inner());
        assert!(ids.len() <= threads(), "{} threads ran items, more than {}", ids.len(), threads());
    }

    #[test]
    fn deep_recursion_fits() {
        fn depth(n: u64) -> u64 {
            let pad = [n; 64];
            if n == 0 {
                0
            } else {
                1 + depth(std::hint::black_box(pad)[0] - 1)
            }
        }
        assert_eq!(on_big_stack("deep", 256 << 20, || depth(100_000)).ok(), Some(100_000));
    }
}
