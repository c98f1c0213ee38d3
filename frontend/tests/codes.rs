//! Error codes: every code has an explanation whose erroneous example fails
//! with exactly that code and whose corrected example compiles; every
//! diagnostic of the corpus carries its code.

use arrayad_frontend::codes::Code;
use arrayad_frontend::compile;

/// The fenced blocks of `markdown` whose info string is `info`.
fn blocks(markdown: &str, info: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match &mut current {
            None if line.trim_start().strip_prefix("```") == Some(info) => current = Some(String::new()),
            Some(text) if line.trim_start().starts_with("```") => {
                out.push(std::mem::take(text));
                current = None;
            }
            Some(text) => {
                text.push_str(line);
                text.push('\n');
            }
            None => {}
        }
    }
    out
}

/// Codes whose error cannot be shown in a short Markdown example.
const NO_EXAMPLE: &[Code] = &[Code::NestingLimit, Code::NotUtf8, Code::RankLimit, Code::Internal];

#[test]
fn every_explanation_has_a_title_and_its_examples_behave() {
    for &code in Code::ALL {
        let text = code.explanation();
        let title = format!("# {code}: {}\n", code.title());
        assert!(text.starts_with(&title), "{code}: the explanation starts with {:?}", text.lines().next());
        let bad = blocks(text, "arr,error");
        if NO_EXAMPLE.contains(&code) {
            assert!(bad.is_empty(), "{code} has an example: take it out of NO_EXAMPLE");
            continue;
        }
        assert_eq!(bad.len(), 1, "{code}: one erroneous example");
        let d = compile(&format!("{code}.arr"), &bad[0]).expect_err(&format!("{code}: the example compiles"));
        let codes: Vec<&str> = d.items().iter().map(|i| i.code).collect();
        assert_eq!(codes, vec![code.as_str()], "{code}: the example gives\n{}", d.render());
        assert!(d.render().starts_with(&format!("error[{code}]: ")), "{}", d.render());
        for good in blocks(text, "arr") {
            if let Err(d) = compile(&format!("{code}-fixed.arr"), &good) {
                panic!("{code}: the corrected example does not compile:\n{}", d.render());
            }
        }
    }
}

#[test]
fn codes_are_unique_and_parse_back() {
    let mut seen = std::collections::HashSet::new();
    for &code in Code::ALL {
        assert!(seen.insert(code.as_str()), "{code} twice");
        assert_eq!(Code::parse(code.as_str()), Some(code));
        assert_eq!(Code::parse(&code.as_str().to_lowercase()), Some(code));
        assert!(code.as_str().len() == 5 && code.as_str().starts_with('E'));
    }
    assert_eq!(Code::parse("E0000"), None);
    assert_eq!(Code::parse("nonsense"), None);
}

#[test]
fn nesting_and_rank_limits_have_their_codes() {
    let deep = format!("def f(x: f64) -> f64 = {}x{}", "(".repeat(300), ")".repeat(300));
    let d = compile("deep.arr", &deep).unwrap_err();
    assert_eq!(d.items()[0].code, "E0005", "{}", d.render());
    let rank = format!("def f(x: {}f64) -> f64 = 0.0", "[1]".repeat(33));
    let d = compile("rank.arr", &rank).unwrap_err();
    assert_eq!(d.items()[0].code, "E0217", "{}", d.render());
}

#[test]
fn suggestions_name_the_closest_name() {
    let notes = |src: &str| {
        let d = compile("s.arr", src).unwrap_err();
        d.items().into_iter().flat_map(|i| i.notes).collect::<Vec<_>>().join("\n")
    };
    let n = notes("def f(weights: [n]f64) -> f64 = sum(wieghts)");
    assert!(n.contains("`weights`"), "{n}");
    let n = notes("def mean(x: [n]f64) -> f64 = sum(x) / f64(n)\ndef f(x: [n]f64) -> f64 = maen(x)");
    assert!(n.contains("`mean`"), "{n}");
    let n = notes("def f(x: f64) -> f64 = sqr(x)");
    assert!(n.contains("`sqrt`"), "{n}");
    let n = notes("def f(x: f64) -> f64 = completely_unrelated(x)");
    assert!(!n.contains("similar"), "{n}");
}
