//! The `arrayad` command line: see `arrayad --help` and LANGUAGE.md
//! section 7.

mod allocator;
mod cli;

#[global_allocator]
static ALLOCATOR: allocator::SmallFast = allocator::SmallFast;

use std::panic;
use std::sync::Mutex;

/// The stack of the thread the command runs on.
const STACK: usize = 256 << 20;

/// Where the panic hook leaves the location of a panic.
static PANIC_LOCATION: Mutex<Option<String>> = Mutex::new(None);

/// On SIGINT, SIGTERM or SIGHUP: removes the files of builds under way
/// (`arrayad build`'s scratch directory and temporary outputs) and exits
/// with status 128 + the signal, as a shell reports a killed command.
fn remove_build_files_on_signals() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else { return };
    let _ = std::thread::Builder::new().name("arrayad-signals".into()).spawn(move || {
        if let Some(signal) = signals.forever().next() {
            arrayad_codegen::remove_build_files();
            std::process::exit(128 + signal);
        }
    });
}

fn main() {
    // A panic is a bug of arrayad: report it as an internal error (exit
    // status 70) without the default hook's noise.
    panic::set_hook(Box::new(|info| {
        if let Ok(mut slot) = PANIC_LOCATION.lock() {
            *slot = info.location().map(|l| format!("{}:{}", l.file(), l.line()));
        }
    }));
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    remove_build_files_on_signals();
    // LLVM's options are the process's, and this process is ours.
    #[cfg(feature = "llvm")]
    arrayad::llvm_vectorise_epilogues();
    // Differentiation and code generation recurse over the nesting of
    // blocks, which inlining bounds: the command runs on a thread with a
    // stack for that depth (only the pages used are touched), or, if no
    // thread can be started, here on the main thread's stack.
    let outcome = arrayad_ir::stack::on_big_stack("arrayad", STACK, move || cli::run(argv));
    let code = match outcome {
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
