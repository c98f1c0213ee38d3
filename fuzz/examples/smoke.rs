//! Runs the checks of the fuzz targets without libFuzzer (any toolchain):
//!
//!     cargo run --release --example smoke -- TARGET COUNT [SEED]   # random inputs
//!     cargo run --release --example smoke -- TARGET FILE...        # given inputs (crashes, corpus)
//!
//! TARGET is `frontend`, `programs` or `json_args`. With
//! `ARRAYAD_FUZZ_SHOW=1`, `programs` prints each generated program.

use arrayad_fuzz::compare::Rng;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(target) = args.first() else {
        eprintln!("usage: smoke TARGET COUNT [SEED] | smoke TARGET FILE...");
        std::process::exit(2);
    };
    let check: fn(&[u8]) = match target.as_str() {
        "frontend" => arrayad_fuzz::check_frontend,
        "programs" => arrayad_fuzz::programs::check,
        "json_args" => arrayad_fuzz::json_args::check,
        other => {
            eprintln!("unknown target `{other}`");
            std::process::exit(2);
        }
    };
    if let Some(count) = args.get(1).and_then(|a| a.parse::<u64>().ok()) {
        let seed = args.get(2).and_then(|a| a.parse::<u64>().ok()).unwrap_or(1);
        let start = std::time::Instant::now();
        for i in 0..count {
            let mut rng = Rng(seed.wrapping_mul(1_000_003).wrapping_add(i));
            let len = 16 + (rng.next_u64() % 240) as usize;
            let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            check(&data);
        }
        let secs = start.elapsed().as_secs_f64();
        if target == "programs" {
            let runs = count * arrayad_fuzz::programs::runs() as u64;
            let excused = arrayad_fuzz::programs::EMPTY_EXTENTS_EXCUSED.load(std::sync::atomic::Ordering::Relaxed);
            eprintln!(
                "{count} inputs, {runs} program runs in {secs:.1} s ({:.0} runs per hour; {excused} excused as the \
                 known difference of empty comprehensions' extents)",
                runs as f64 / secs * 3600.0
            );
        } else {
            eprintln!("{count} inputs in {secs:.1} s");
        }
    } else {
        for path in &args[1..] {
            let data = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
            eprintln!("{path}");
            check(&data);
        }
    }
}
