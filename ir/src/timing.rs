//! Wall-clock time of the compiler's phases, for work on compile time:
//! with `ARRAYAD_TIME_PASSES=1` in the environment, every phase wrapped in
//! [`time`] prints `arrayad: time: PHASE: SECONDS s` to stderr when it
//! ends (as rustc's `-Z time-passes`). Phases nest; the inner ones print
//! first. Without the variable, [`time`] only calls its closure.

use std::sync::OnceLock;
use std::time::Instant;

/// Whether `ARRAYAD_TIME_PASSES` is set (to anything but `0` or empty),
/// read once per process.
pub fn enabled() -> bool {
    static ENABLED: OnceLock<bool> = OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var("ARRAYAD_TIME_PASSES").is_ok_and(|v| !v.is_empty() && v != "0"))
}

/// Runs `f`, printing its wall-clock time under `phase` when [`enabled`].
pub fn time<T>(phase: &str, f: impl FnOnce() -> T) -> T {
    if !enabled() {
        return f();
    }
    let start = Instant::now();
    let out = f();
    eprintln!("arrayad: time: {phase}: {:.3} s", start.elapsed().as_secs_f64());
    out
}
