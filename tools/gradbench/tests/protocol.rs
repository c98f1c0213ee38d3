//! The GradBench tool end to end: a session replayed through the binary
//! (start, define and evaluate of every eval on small inputs, analysis, end
//! of input), its outputs checked against values computed independently
//! (closed forms and direct implementations here; for gmm, ba, lstm and ht
//! the reference interpreter and finite differences of it), and malformed
//! messages answered, never a crash.

use arrayad_gradbench::{Tool, ToolOptions};
use serde_json::{json, Value as Json};
use std::io::Write;
use std::process::{Command, Stdio};

/// Runs the binary with `args` on `messages` (one per line) and returns
/// its responses.
fn session(args: &[&str], messages: &[Json], extra_lines: &[&str]) -> Vec<Json> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_arrayad-gradbench"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run arrayad-gradbench");
    {
        let mut stdin = child.stdin.take().expect("stdin");
        for m in messages {
            writeln!(stdin, "{m}").expect("write a message");
        }
        for l in extra_lines {
            writeln!(stdin, "{l}").expect("write a line");
        }
    }
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "exit status {:?}: {}", out.status, String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .expect("UTF-8")
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect()
}

/// The output of `function` of `module` on `input` by the reference
/// interpreter (in process).
fn interp(module: &str, function: &str, input: &Json) -> Json {
    let mut tool = Tool::new(ToolOptions::new(Some("interp")).unwrap());
    let d: Json =
        serde_json::from_str(&tool.handle(&json!({"id": 0, "kind": "define", "module": module}).to_string())).unwrap();
    assert_eq!(d["success"], true, "{d}");
    let m = json!({"id": 1, "kind": "evaluate", "module": module, "function": function, "input": input});
    let r: Json = serde_json::from_str(&tool.handle(&m.to_string())).unwrap();
    assert_eq!(r["success"], true, "{module}.{function}: {r}");
    r["output"].clone()
}

/// A deterministic number in [-1, 1) (a linear congruential sequence).
struct Numbers(u64);

impl Numbers {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    }
    fn vec(&mut self, n: usize) -> Vec<f64> {
        (0..n).map(|_| self.next()).collect()
    }
    fn matrix(&mut self, n: usize, m: usize) -> Vec<Vec<f64>> {
        (0..n).map(|_| self.vec(m)).collect()
    }
}

fn runs(input: Json) -> Json {
    let mut input = input;
    input["min_runs"] = json!(2);
    input["min_seconds"] = json!(0);
    input
}

fn num(j: &Json) -> f64 {
    j.as_f64().unwrap_or_else(|| panic!("not a number: {j}"))
}

fn nums(j: &Json) -> Vec<f64> {
    fn go(j: &Json, out: &mut Vec<f64>) {
        match j {
            Json::Array(a) => a.iter().for_each(|x| go(x, out)),
            x => out.push(num(x)),
        }
    }
    let mut out = Vec::new();
    go(j, &mut out);
    out
}

fn close(what: &str, got: f64, want: f64, tol: f64) {
    assert!((got - want).abs() <= tol * (1.0 + want.abs()), "{what}: got {got}, want {want}");
}

fn close_all(what: &str, got: &[f64], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        close(&format!("{what}[{k}]"), *g, *w, tol);
    }
}

/// Central finite difference of `f` at the number at `path` (JSON pointer)
/// of `input`.
fn fd(input: &Json, path: &str, f: &dyn Fn(&Json) -> f64) -> f64 {
    let h = 1e-6;
    let at = |delta: f64| {
        let mut i = input.clone();
        let x = i.pointer_mut(path).unwrap_or_else(|| panic!("no {path}"));
        *x = json!(num(x) + delta);
        f(&i)
    };
    (at(h) - at(-h)) / (2.0 * h)
}

/// The inputs of the session and the checks of its outputs.
struct Case {
    module: &'static str,
    function: &'static str,
    input: Json,
    check: Box<dyn Fn(&Json)>,
}

fn cases() -> Vec<Case> {
    let mut r = Numbers(7);
    let mut cases = Vec::new();
    let mut add = |module, function, input, check: Box<dyn Fn(&Json)>| {
        cases.push(Case { module, function, input, check });
    };

    // hello: x^2 and 2x.
    add("hello", "square", json!(3.0), Box::new(|o| assert_eq!(num(o), 9.0)));
    add("hello", "double", json!(-1.5), Box::new(|o| assert_eq!(num(o), -3.0)));

    // lse: log(sum exp(x)) and the softmax.
    let x = r.vec(6);
    let lse = x.iter().map(|v| v.exp()).sum::<f64>().ln();
    let softmax: Vec<f64> = x.iter().map(|v| (v - lse).exp()).collect();
    add("lse", "primal", runs(json!({ "x": x })), Box::new(move |o| close("lse", num(o), lse, 1e-14)));
    add("lse", "gradient", runs(json!({ "x": x })), Box::new(move |o| close_all("lse'", &nums(o), &softmax, 1e-14)));

    // llsq: the objective and its gradient written out directly.
    let (xs, n) = (r.vec(4), 7usize);
    let residual = |xs: &[f64], i: usize| {
        let t = -1.0 + i as f64 * 2.0 / (n as f64 - 1.0);
        let s = if t > 0.0 {
            1.0
        } else if t < 0.0 {
            -1.0
        } else {
            0.0
        };
        (s - xs.iter().enumerate().map(|(j, c)| c * t.powi(j as i32)).sum::<f64>(), t)
    };
    let y: f64 = (0..n).map(|i| residual(&xs, i).0.powi(2)).sum::<f64>() / 2.0;
    let g: Vec<f64> =
        (0..xs.len()).map(|j| (0..n).map(|i| -residual(&xs, i).0 * residual(&xs, i).1.powi(j as i32)).sum()).collect();
    let input = runs(json!({ "x": xs, "n": n }));
    add("llsq", "primal", input.clone(), Box::new(move |o| close("llsq", num(o), y, 1e-13)));
    add("llsq", "gradient", input, Box::new(move |o| close_all("llsq'", &nums(o), &g, 1e-13)));

    // det: 3 x 3 by the rule of Sarrus, the gradient the cofactor matrix.
    let a = r.vec(9);
    let m = |i: usize, j: usize| a[3 * i + j];
    let det = m(0, 0) * (m(1, 1) * m(2, 2) - m(1, 2) * m(2, 1)) - m(0, 1) * (m(1, 0) * m(2, 2) - m(1, 2) * m(2, 0))
        + m(0, 2) * (m(1, 0) * m(2, 1) - m(1, 1) * m(2, 0));
    let cof: Vec<f64> = (0..9)
        .map(|k| {
            let (i, j) = (k / 3, k % 3);
            let (r0, r1) = ((i + 1) % 3, (i + 2) % 3);
            let (c0, c1) = ((j + 1) % 3, (j + 2) % 3);
            m(r0, c0) * m(r1, c1) - m(r0, c1) * m(r1, c0)
        })
        .collect();
    let input = runs(json!({ "A": a, "ell": 3 }));
    add("det", "primal", input.clone(), Box::new(move |o| close("det", num(o), det, 1e-14)));
    add("det", "gradient", input, Box::new(move |o| close_all("det'", &nums(o), &cof, 1e-14)));

    // ode: RK4 written out; the gradient of the last element by finite
    // differences of it.
    fn rk4(x: &[f64], s: usize) -> Vec<f64> {
        let n = x.len();
        let f = |y: &[f64]| -> Vec<f64> { (0..n).map(|i| if i == 0 { x[0] } else { x[i] * y[i - 1] }).collect() };
        let h = 2.0 / s as f64;
        let mut y = vec![0.0; n];
        for _ in 0..s {
            let k1 = f(&y);
            let k2 = f(&(0..n).map(|i| y[i] + h * k1[i] / 2.0).collect::<Vec<_>>());
            let k3 = f(&(0..n).map(|i| y[i] + h * k2[i] / 2.0).collect::<Vec<_>>());
            let k4 = f(&(0..n).map(|i| y[i] + h * k3[i]).collect::<Vec<_>>());
            y = (0..n).map(|i| y[i] + h * (k1[i] + 2.0 * k2[i] + 2.0 * k3[i] + k4[i]) / 6.0).collect();
        }
        y
    }
    let xo = r.vec(4);
    let want = rk4(&xo, 3);
    let grad: Vec<f64> = (0..xo.len())
        .map(|j| {
            let at = |d: f64| {
                let mut x = xo.clone();
                x[j] += d;
                rk4(&x, 3)[3]
            };
            (at(1e-6) - at(-1e-6)) / 2e-6
        })
        .collect();
    let input = runs(json!({ "x": xo, "s": 3 }));
    add("ode", "primal", input.clone(), Box::new(move |o| close_all("ode", &nums(o), &want, 1e-14)));
    add("ode", "gradient", input, Box::new(move |o| close_all("ode'", &nums(o), &grad, 1e-7)));

    // kmeans: the cost, and the Newton direction C_j - mean of its points.
    let points = vec![vec![0.0, 0.0], vec![0.5, 0.2], vec![4.0, 4.0], vec![5.0, 3.5], vec![4.5, 5.0]];
    let centroids = vec![vec![0.1, 0.3], vec![4.2, 4.1]];
    let assign = |p: &[f64]| {
        let d = |c: &[f64]| (p[0] - c[0]).powi(2) + (p[1] - c[1]).powi(2);
        if d(&centroids[0]) <= d(&centroids[1]) {
            (0, d(&centroids[0]))
        } else {
            (1, d(&centroids[1]))
        }
    };
    let cost: f64 = points.iter().map(|p| assign(p).1).sum();
    let dir: Vec<f64> = (0..2)
        .flat_map(|j| {
            let mine: Vec<&Vec<f64>> = points.iter().filter(|p| assign(p).0 == j).collect();
            let mean = |k: usize| mine.iter().map(|p| p[k]).sum::<f64>() / mine.len() as f64;
            vec![centroids[j][0] - mean(0), centroids[j][1] - mean(1)]
        })
        .collect();
    let input = runs(json!({ "points": points, "centroids": centroids }));
    add("kmeans", "cost", input.clone(), Box::new(move |o| close("cost", num(o), cost, 1e-14)));
    add("kmeans", "dir", input, Box::new(move |o| close_all("dir", &nums(o), &dir, 1e-14)));

    // gmm, ba, lstm, ht: the interpreter, and finite differences of it.
    let (d, k, n) = (3usize, 2usize, 4usize);
    let gmm = runs(json!({
        "d": d, "k": k, "n": n,
        "alpha": r.vec(k), "mu": r.matrix(k, d), "q": r.matrix(k, d), "l": r.matrix(k, d * (d - 1) / 2),
        "x": r.matrix(n, d), "m": 2, "gamma": 1.5,
    }));
    let g2 = gmm.clone();
    add(
        "gmm",
        "objective",
        gmm.clone(),
        Box::new(move |o| close("gmm", num(o), num(&interp("gmm", "objective", &g2)), 1e-13)),
    );
    let g2 = gmm.clone();
    add(
        "gmm",
        "jacobian",
        gmm,
        Box::new(move |o| {
            let f = |i: &Json| num(&interp("gmm", "objective", i));
            for (field, path) in [("alpha", "/alpha/1"), ("mu", "/mu/1/2"), ("q", "/q/0/1"), ("l", "/l/1/2")] {
                let got = num(o[field].pointer(&path[field.len() + 1..]).unwrap());
                close(&format!("gmm d/{path}"), got, fd(&g2, path, &f), 1e-6);
            }
        }),
    );

    let ba = runs(json!({
        "n": 2, "m": 3, "p": 5,
        "cam": [0.1, -0.2, 0.3, 0.5, -0.4, 1.0, 300.0, 0.2, -0.1, 0.001, 0.0002],
        "x": [0.3, -0.5, 4.0], "w": 0.9, "feat": [-5.0, 12.0],
    }));
    let b2 = ba.clone();
    add("ba", "objective", ba.clone(), Box::new(move |o| assert_eq!(o, &interp("ba", "objective", &b2))));
    let b2 = ba.clone();
    add(
        "ba",
        "jacobian",
        ba,
        Box::new(move |o| {
            // CSR row pointers, then observation 0's two rows of 15 (camera,
            // point, weight), then the weight error of the last observation.
            let rows = nums(&o["rows"]);
            assert_eq!(rows[..4], [0.0, 15.0, 30.0, 45.0]);
            assert_eq!(rows[rows.len() - 1], 31.0 * 5.0);
            let vals = nums(&o["vals"]);
            assert_eq!(vals.len(), 31);
            let err = |i: &Json, r: usize| num(&interp("ba", "objective", i)["reproj_error"]["elements"][r]);
            for (c, path) in [(0, "/cam/0"), (6, "/cam/6"), (12, "/x/1"), (14, "/w")] {
                for r in 0..2 {
                    let want = fd(&b2, path, &|i| err(i, r));
                    close(&format!("ba d err{r}/d {path}"), vals[15 * r + c], want, 1e-5);
                }
            }
            close("ba w'", vals[30], -2.0 * 0.9, 1e-14);
        }),
    );

    let (l, b, c) = (2usize, 3usize, 5usize);
    let bits = |r: &mut Numbers| -> Vec<Vec<f64>> {
        (0..c).map(|_| (0..b).map(|_| if r.next() > 0.0 { 1.0 } else { 0.0 }).collect()).collect()
    };
    let lstm = runs(json!({
        "main_params": r.matrix(2 * l, 4 * b), "extra_params": r.matrix(3, b),
        "state": r.matrix(2 * l, b), "sequence": bits(&mut r),
    }));
    let l2 = lstm.clone();
    add(
        "lstm",
        "objective",
        lstm.clone(),
        Box::new(move |o| close("lstm", num(o), num(&interp("lstm", "objective", &l2)), 1e-14)),
    );
    let l2 = lstm.clone();
    add(
        "lstm",
        "jacobian",
        lstm,
        Box::new(move |o| {
            let g = nums(o);
            assert_eq!(g.len(), 8 * l * b + 3 * b);
            let f = |i: &Json| num(&interp("lstm", "objective", i));
            // main_params is [2l][4b], flattened row-major, then extra_params.
            for (k, path) in
                [(0, "/main_params/0/0"), (4 * b + 5, "/main_params/1/5"), (8 * l * b + 4, "/extra_params/1/1")]
            {
                close(&format!("lstm d/{path}"), g[k], fd(&l2, path, &f), 1e-7);
            }
        }),
    );

    let ht = runs(ht_input(&mut r));
    let h2 = ht.clone();
    add(
        "ht",
        "objective",
        ht.clone(),
        Box::new(move |o| close_all("ht", &nums(o), &nums(&interp("ht", "objective", &h2)), 1e-13)),
    );
    let h2 = ht.clone();
    add(
        "ht",
        "jacobian",
        ht,
        Box::new(move |o| {
            let rows = o.as_array().unwrap();
            assert_eq!(rows.len(), 3 * 3);
            assert!(rows.iter().all(|r| r.as_array().unwrap().len() == 28));
            for (col, path) in [(2, "/theta/0"), (5, "/theta/3"), (9, "/theta/7"), (20, "/theta/18")] {
                for row in [0, 4, 8] {
                    let want = fd(&h2, path, &|i| nums(&interp("ht", "objective", i))[row]);
                    close(&format!("ht d r{row}/d {path}"), num(&rows[row][col]), want, 1e-6);
                }
            }
            // Column 0: every point's first barycentric coordinate at once.
            let f = |i: &Json| nums(&interp("ht", "objective", i))[3];
            close("ht d r3/d us[1][0]", num(&rows[3][0]), fd(&h2, "/us/1/0", &f), 1e-6);
            // Every entry: the program's own Jacobian (one `jvp` per column
            // inside the language), on the interpreter.
            let own = ht_jacobian_in_language(&h2);
            for (r, (got, want)) in rows.iter().zip(&own).enumerate() {
                close_all(&format!("ht jacobian row {r}"), &nums(got), want, 1e-13);
            }
        }),
    );

    // particle and saddle: GradBench's reference values.
    for f in ["ff", "fr", "rf", "rr"] {
        add("particle", f, runs(json!({"w": 0.0})), Box::new(|o| close("particle", num(o), 0.2071918746486116, 1e-12)));
        add(
            "saddle",
            f,
            runs(json!({"start": [1.0, 1.0]})),
            Box::new(|o| close_all("saddle", &nums(o), &[8.246324826140356e-06; 4], 1e-12)),
        );
    }
    cases
}

/// `ht_jacobian_complicated` of the ht program (one `jvp` per column
/// inside the language) on `input`, on the interpreter: its rows.
fn ht_jacobian_in_language(input: &Json) -> Vec<Vec<f64>> {
    let eval = arrayad_gradbench::evals::find("ht").unwrap();
    let call = eval.call("objective", input).unwrap();
    let arrayad_gradbench::evals::Args::Json(args) = call.args else { panic!("ht takes JSON arguments") };
    let module =
        arrayad::Module::compile_with("ht.arr", eval.source(), arrayad::Options::backend(arrayad::Backend::Interp))
            .unwrap();
    let f = module.function("ht_jacobian_complicated").unwrap();
    let args = arrayad::json::decode_args("ht_jacobian_complicated", f.signature(), &Json::Array(args)).unwrap();
    let argv: Vec<arrayad::Arg<'_>> = args.iter().map(arrayad::Arg::Value).collect();
    let out = f.call(&argv).unwrap();
    let arrayad::Value::Array(a) = &out[0] else { panic!("not an array") };
    let data = out[0].f64_elements().unwrap();
    data.chunks(a.shape[1]).map(<[f64]>::to_vec).collect()
}

/// A small synthetic hand: 22 bones (the wrist, four per finger, the
/// forearm) in chains, 8 vertices, 4 triangles, 3 points on them.
fn ht_input(r: &mut Numbers) -> Json {
    let nb = 22;
    let mut parents = vec![-1i64];
    for f in 0..5 {
        for k in 0..4 {
            parents.push(if k == 0 { 0 } else { (1 + 4 * f + k - 1) as i64 });
        }
    }
    parents.push(0);
    let transform = |r: &mut Numbers| -> Vec<Vec<f64>> {
        let (a, b) = (0.3 * r.next(), 0.3 * r.next());
        vec![
            vec![a.cos(), -a.sin(), 0.0, r.next()],
            vec![a.sin() * b.cos(), a.cos() * b.cos(), -b.sin(), r.next()],
            vec![a.sin() * b.sin(), a.cos() * b.sin(), b.cos(), r.next()],
            vec![0.0, 0.0, 0.0, 1.0],
        ]
    };
    let base_relatives: Vec<_> = (0..nb).map(|_| transform(r)).collect();
    let inverse_base_absolutes: Vec<_> = (0..nb).map(|_| transform(r)).collect();
    let nv = 8;
    let base_positions: Vec<Vec<f64>> = (0..nv).map(|_| vec![r.next(), r.next(), r.next(), 1.0]).collect();
    // Like the published model's, most weights are zero (the program skips
    // those bones): each vertex follows every third bone.
    let weights: Vec<Vec<f64>> = (0..nv)
        .map(|v| {
            let w: Vec<f64> = (0..nb).map(|b| if (b + v) % 3 == 0 { r.next().abs() } else { 0.0 }).collect();
            let s: f64 = w.iter().sum();
            w.iter().map(|x| x / s).collect()
        })
        .collect();
    let triangles = vec![vec![0, 1, 2], vec![2, 3, 4], vec![4, 5, 6], vec![5, 6, 7]];
    let theta: Vec<f64> = (0..26).map(|_| 0.5 * r.next()).collect();
    json!({
        "theta": theta,
        "us": [[0.2, 0.3], [0.5, 0.1], [0.3, 0.3]],
        "data": {
            "model": {
                "bone_count": nb,
                "bone_names": (0..nb).map(|b| format!("bone{b}")).collect::<Vec<_>>(),
                "parents": parents,
                "base_relatives": base_relatives,
                "inverse_base_absolutes": inverse_base_absolutes,
                "base_positions": base_positions,
                "weights": weights,
                "triangles": triangles,
                "is_mirrored": false,
            },
            "correspondences": [0, 2, 3],
            "points": r.matrix(3, 3),
        },
    })
}

#[test]
fn a_session_of_every_eval_gets_right_answers() {
    let cases = cases();
    let mut messages = vec![json!({"id": 0, "kind": "start", "eval": "all"})];
    let mut id = 1;
    let mut defined = Vec::new();
    let mut expect: Vec<(i64, Option<usize>)> = vec![(0, None)];
    for (k, c) in cases.iter().enumerate() {
        if !defined.contains(&c.module) {
            defined.push(c.module);
            messages.push(json!({"id": id, "kind": "define", "module": c.module}));
            expect.push((id, None));
            id += 1;
        }
        messages.push(json!({
            "id": id, "kind": "evaluate", "module": c.module, "function": c.function,
            "input": c.input, "description": "test",
        }));
        expect.push((id, Some(k)));
        id += 1;
        messages.push(json!({"id": id, "kind": "analysis", "of": id - 1, "valid": true}));
        expect.push((id, None));
        id += 1;
    }
    let responses = session(&[], &messages, &[]);
    assert_eq!(responses.len(), messages.len());
    assert_eq!(responses[0]["tool"], "arrayad");
    assert!(responses[0]["config"]["backend"].is_string());
    for ((want_id, case), (m, r)) in expect.iter().zip(messages.iter().zip(&responses)) {
        assert_eq!(r["id"], json!(want_id), "{r}");
        match m["kind"].as_str() {
            Some("define") => {
                assert_eq!(r["success"], true, "{m}: {r}");
                assert_eq!(r["timings"][0]["name"], "compile", "{r}");
            }
            Some("evaluate") => {
                assert_eq!(r["success"], true, "{}.{}: {r}", m["module"], m["function"]);
                let timings = r["timings"].as_array().unwrap();
                let want = if m["module"] == "hello" { 1 } else { 2 };
                assert_eq!(timings.len(), want, "min_runs: {r}");
                assert!(timings.iter().all(|t| t["name"] == "evaluate" && t["nanoseconds"].is_u64()));
                let c = &cases[case.unwrap()];
                (c.check)(&r["output"]);
            }
            Some("start") => {}
            _ => assert_eq!(r.as_object().map(|o| o.len()), Some(1), "{r}"),
        }
    }
}

#[test]
fn malformed_messages_and_failures_are_answered() {
    let messages = [
        json!({"id": 1, "kind": "evaluate", "module": "lse", "function": "primal", "input": {"x": [1.0]}}),
        json!({"id": 2, "kind": "define", "module": "nope"}),
        json!({"id": 3, "kind": "define"}),
        json!({"id": 4, "kind": "define", "module": "det"}),
        json!({"id": 5, "kind": "evaluate", "module": "det", "function": "inverse", "input": {}}),
        json!({"id": 6, "kind": "evaluate", "module": "det", "function": "primal", "input": {"A": [1.0]}}),
        json!({"id": 7, "kind": "evaluate", "module": "det", "function": "primal", "input": {"A": [1.0, 2.0, 3.0], "ell": 2}}),
        json!({"id": 8, "kind": "evaluate", "module": "det", "function": "primal", "input": {"A": "x", "ell": 1}}),
        json!({"id": 9, "kind": "evaluate", "module": "det", "function": "primal", "input": {"A": [1.0], "ell": 40}}),
        json!({"id": 10, "kind": "evaluate", "module": "det", "function": "primal", "input": {"A": [2.0], "ell": 1, "min_runs": -3}}),
        json!({"id": 11, "kind": "hello"}),
        json!({"id": 12, "kind": "evaluate", "module": "det", "function": "primal", "input": {"A": [2.0], "ell": 1}}),
    ];
    let r = session(&[], &messages, &["not json", "{\"kind\": \"start\"}", "[1, 2]"]);
    assert_eq!(r.len(), messages.len() + 3);
    let failure = |k: usize, needle: &str| {
        assert_eq!(r[k]["success"], false, "{}", r[k]);
        let e = r[k]["error"].as_str().unwrap_or("");
        assert!(e.contains(needle), "response {k}: {e}\nwant: {needle}");
    };
    failure(0, "the module `lse` is not defined");
    failure(1, "no implementation of the module `nope`");
    failure(2, "malformed message: no string `module`");
    assert_eq!(r[3]["success"], true);
    failure(4, "no function `inverse`");
    failure(5, "no field `ell`");
    failure(6, "det.arr:");
    failure(6, "size mismatch: reshape of `A`, which has 3 elements, to a shape of 4 elements");
    failure(7, "ARGS");
    failure(8, "`ell` must be an integer from 1 to 12");
    failure(9, "`min_runs` must be a non-negative integer");
    assert_eq!(r[10], json!({"id": 11}));
    assert_eq!(r[11]["output"], json!(2.0));
    for (k, resp) in r.iter().enumerate().skip(12) {
        assert_eq!(resp["id"], Json::Null, "{resp}");
        failure(k, "malformed message");
    }
}

#[test]
fn flush_subnormals_flushes_the_gradients_subnormal_entries() {
    // The softmax of [0, -720]: its second entry, e^-720 = 2.9e-313, is
    // subnormal with IEEE arithmetic and zero when the calls flush.
    let messages = [
        json!({"id": 0, "kind": "start", "eval": "lse"}),
        json!({"id": 1, "kind": "define", "module": "lse"}),
        json!({"id": 2, "kind": "evaluate", "module": "lse", "function": "gradient", "input": runs(json!({"x": [0.0, -720.0]}))}),
    ];
    for flush in [false, true] {
        let args: &[&str] = if flush { &["--flush-subnormals"] } else { &[] };
        let r = session(args, &messages, &[]);
        assert_eq!(r[0]["config"]["flush_subnormals"], flush, "{}", r[0]);
        assert_eq!(r[2]["success"], true, "{}", r[2]);
        let g = nums(&r[2]["output"]);
        assert_eq!(g[0], 1.0, "flush {flush}: {g:?}");
        if flush {
            assert_eq!(g[1], 0.0, "flushed: {g:?}");
        } else {
            // A subnormal number this size keeps about 36 bits.
            let want = (-720.0f64).exp();
            assert!(g[1].is_subnormal() && ((g[1] - want) / want).abs() < 1e-9, "IEEE: {g:?}, want {want:e}");
        }
    }
}
