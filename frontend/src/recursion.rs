//! Recursion, direct or mutual, is a compile error: find the cycles of the
//! call graph and report each at a call site that closes one.

use crate::codes::Code;
use crate::diagnostics::Diagnostic;
use crate::span::Span;
use std::collections::HashSet;

/// Reports every back edge of a depth-first search of the call graph
/// (`calls[f]` lists the definitions `f` calls, with the call sites), once
/// per pair of caller and callee. The search is iterative.
pub(crate) fn check_recursion(names: &[String], calls: &[Vec<(usize, Span)>], diags: &mut Vec<Diagnostic>) {
    const WHITE: u8 = 0;
    const GRAY: u8 = 1;
    const BLACK: u8 = 2;
    let n = calls.len();
    let mut state = vec![WHITE; n];
    let mut reported: HashSet<(usize, usize)> = HashSet::new();
    let name = |i: usize| names.get(i).map_or("?", String::as_str);
    for root in 0..n {
        if state[root] != WHITE {
            continue;
        }
        state[root] = GRAY;
        let mut stack: Vec<(usize, usize)> = vec![(root, 0)];
        while let Some(top) = stack.last_mut() {
            let (u, k) = *top;
            let Some(&(v, span)) = calls[u].get(k) else {
                state[u] = BLACK;
                stack.pop();
                continue;
            };
            top.1 += 1;
            match state.get(v).copied() {
                Some(WHITE) => {
                    state[v] = GRAY;
                    stack.push((v, 0));
                }
                Some(GRAY) if reported.insert((u, v)) => {
                    let msg = if u == v {
                        format!("recursion is not allowed: `{}` calls itself", name(u))
                    } else {
                        let from = stack.iter().position(|&(w, _)| w == v).unwrap_or(0);
                        let mut cycle: Vec<String> =
                            stack[from..].iter().map(|&(w, _)| format!("`{}`", name(w))).collect();
                        cycle.push(format!("`{}`", name(v)));
                        format!("mutual recursion is not allowed: {}", cycle.join(" -> "))
                    };
                    diags.push(Diagnostic::new(Code::Recursion, span, msg));
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(calls: Vec<Vec<usize>>) -> Vec<String> {
        let names: Vec<String> = (0..calls.len()).map(|i| format!("f{i}")).collect();
        let calls: Vec<Vec<(usize, Span)>> =
            calls.into_iter().map(|c| c.into_iter().map(|v| (v, Span::default())).collect()).collect();
        let mut d = Vec::new();
        check_recursion(&names, &calls, &mut d);
        d.into_iter().map(|d| d.message).collect()
    }

    #[test]
    fn cycles() {
        assert!(run(vec![vec![1], vec![2], vec![]]).is_empty());
        assert!(run(vec![vec![1, 1], vec![], vec![0, 1]]).is_empty());
        assert_eq!(run(vec![vec![0, 0]]), vec!["recursion is not allowed: `f0` calls itself"]);
        assert_eq!(
            run(vec![vec![1], vec![2], vec![0]]),
            vec!["mutual recursion is not allowed: `f0` -> `f1` -> `f2` -> `f0`"]
        );
    }

    #[test]
    fn long_chain_does_not_overflow() {
        let n = 200_000;
        let calls: Vec<Vec<usize>> = (0..n).map(|i| if i + 1 < n { vec![i + 1] } else { vec![0] }).collect();
        assert_eq!(run(calls).len(), 1);
    }
}
