//! The `arrayad` command line: see `arrayad --help` and LANGUAGE.md
//! section 7.

mod cli;

use std::panic;
use std::sync::Mutex;

/// Where the panic hook leaves the location of a panic.
static PANIC_LOCATION: Mutex<Option<String>> = Mutex::new(None);

fn main() {
    // A panic is a bug of arrayad: report it as an internal error (exit
    // status 70) without the default hook's noise.
    panic::set_hook(Box::new(|info| {
        if let Ok(mut slot) = PANIC_LOCATION.lock() {
            *slot = info.location().map(|l| format!("{}:{}", l.file(), l.line()));
        }
    }));
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let code = match panic::catch_unwind(move || cli::run(argv)) {
        Ok(code) => code,
        Err(payload) => {
            let location = PANIC_LOCATION.lock().ok().and_then(|mut s| s.take());
            eprintln!(
                "arrayad: internal error: {}{} (please report this bug)",
                arrayad::panic_message(&*payload),
                location.map(|l| format!(" at {l}")).unwrap_or_default()
            );
            70
        }
    };
    std::process::exit(code);
}
