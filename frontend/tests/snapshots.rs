//! Snapshot tests of rendered diagnostics over a corpus of wrong programs
//! (`tests/wrong/*.arr`): the codes, messages, spans, notes and
//! suggestions users see. Review changes with `cargo insta review` (or
//! rerun with `INSTA_UPDATE=always` and read the diff).

use arrayad_frontend::compile;

#[test]
fn wrong_programs() {
    insta::glob!("wrong/*.arr", |path| {
        let source = std::fs::read_to_string(path).unwrap();
        let name = format!("wrong/{}", path.file_name().unwrap().to_string_lossy());
        let d = compile(&name, &source).expect_err("a program of the wrong-program corpus compiles");
        insta::assert_snapshot!(d.render());
    });
}
