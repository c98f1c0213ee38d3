//! The checks behind the fuzz targets of arrayad (`fuzz_targets/`), in a
//! library so that they can be read and reused in one place.

pub mod compare;
pub mod generate;
pub mod json_args;
pub mod programs;

/// The `frontend` target: `data` as a source file, read as the command line
/// reads one (bytes that are not UTF-8 are a diagnostic at the first bad
/// byte), compiled by `arrayad_frontend::compile`. Never a panic; an
/// internal-compiler-error diagnostic (a caught panic or an IR that fails
/// verification) is a crash too; every diagnostic renders with its
/// location.
pub fn check_frontend(data: &[u8]) {
    let file = "fuzz.arr";
    let result = match std::str::from_utf8(data) {
        Ok(source) => arrayad_frontend::compile(file, source).map(|_| ()),
        Err(e) => {
            let at = e.valid_up_to();
            let text = String::from_utf8_lossy(data);
            let bad = text.get(at..).and_then(|t| t.chars().next()).map_or(0, char::len_utf8);
            Err(arrayad_frontend::Diagnostics::single(
                file,
                &text,
                arrayad_frontend::codes::Code::NotUtf8,
                at..at + bad,
                "the file is not valid UTF-8",
            ))
        }
    };
    if let Err(d) = result {
        let rendered = d.render();
        let entries = d.entries();
        assert!(!entries.is_empty(), "an error without diagnostics");
        for (message, line, col) in &entries {
            assert!(!message.starts_with("internal compiler error"), "{message} at {line}:{col}\n{rendered}");
            assert!(
                rendered.contains(&format!("{file}:{line}:{col}")),
                "{file}:{line}:{col} not rendered:\n{rendered}"
            );
        }
    }
}
