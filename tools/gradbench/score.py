#!/usr/bin/env python3
"""Summarises GradBench logs (`gradbench run -o LOG`) as run.sh writes them:
LOGDIR/EVAL/TOOL.jsonl. For every eval and tool: the evaluations answered,
how many the eval judged valid, and GradBench's score (as its
crates/gradbench/src/stats.rs computes it: 1 / the sum over workloads of the
mean primal time plus the mean derivative time; for particle and saddle,
1 / the mean time of the fastest function). With a reference tool
(`--against manual`), also the ratio of each tool's score to it.

    python3 score.py LOGDIR [--against manual] [--markdown]
"""

import argparse
import json
import pathlib
import sys

# (primal, derivative) function names of the "classic" evals.
CLASSIC = {
    "ba": ("objective", "jacobian"),
    "gmm": ("objective", "jacobian"),
    "ht": ("objective", "jacobian"),
    "lstm": ("objective", "jacobian"),
    "kmeans": ("cost", "dir"),
    "ode": ("primal", "gradient"),
    "llsq": ("primal", "gradient"),
    "det": ("primal", "gradient"),
    "lse": ("primal", "gradient"),
}
EQUIVALENT = {"particle", "saddle"}


def read_log(path):
    """The (message, response) pairs of a log; a response may be None."""
    pairs = []
    pending = None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            entry = json.loads(line)
            if "message" in entry:
                if pending is not None:
                    pairs.append((pending, None))
                pending = entry["message"]
            elif "response" in entry and pending is not None:
                pairs.append((pending, entry["response"]))
                pending = None
    if pending is not None:
        pairs.append((pending, None))
    return pairs


def mean_evaluate_ns(response):
    ts = [t["nanoseconds"] for t in response.get("timings") or [] if t.get("name") == "evaluate"]
    return sum(ts) / len(ts) if ts else None


def summarise(eval_name, path):
    pairs = read_log(path)
    evaluations = {m["id"]: (m, r) for m, r in pairs if m.get("kind") == "evaluate"}
    answered = sum(1 for m, r in evaluations.values() if r is not None and r.get("success"))
    failed = [
        (m.get("function"), m.get("description"), (r or {}).get("error", "no response"))
        for m, r in evaluations.values()
        if r is None or not r.get("success")
    ]
    valid = invalid = 0
    invalid_errors = []
    for m, _ in pairs:
        if m.get("kind") == "analysis":
            if m.get("valid"):
                valid += 1
            else:
                invalid += 1
                of = evaluations.get(m.get("of"), ({}, None))[0]
                invalid_errors.append((of.get("function"), of.get("description"), m.get("error", "")))
    score = None
    times = {}
    if eval_name in CLASSIC:
        primal, derivative = CLASSIC[eval_name]
        workloads = {}
        for m, r in evaluations.values():
            if r is None or not r.get("success") or m.get("description") is None:
                continue
            t = mean_evaluate_ns(r)
            if t is None:
                continue
            w = workloads.setdefault(m["description"], {})
            w[m["function"]] = t
        total = sum(w.get(primal, 0) + w.get(derivative, 0) for w in workloads.values())
        score = 1e9 / total if total > 0 else None
        times = workloads
    elif eval_name in EQUIVALENT:
        per_function = {}
        for m, r in evaluations.values():
            if r is not None and r.get("success"):
                t = mean_evaluate_ns(r)
                if t is not None:
                    per_function[m["function"]] = t
        if per_function:
            score = 1e9 / min(per_function.values())
        times = per_function
    return {
        "evaluations": len(evaluations),
        "answered": answered,
        "valid": valid,
        "invalid": invalid,
        "failed": failed,
        "invalid_errors": invalid_errors,
        "score": score,
        "times": times,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("logdir")
    ap.add_argument("--against", help="the reference tool of the score ratios (e.g. manual)")
    ap.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = ap.parse_args()
    root = pathlib.Path(args.logdir)
    rows = []
    for eval_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        results = {log.stem: summarise(eval_dir.name, log) for log in sorted(eval_dir.glob("*.jsonl"))}
        ref = results.get(args.against) if args.against else None
        for tool, s in results.items():
            ratio = None
            if ref and ref["score"] and s["score"] and tool != args.against:
                ratio = s["score"] / ref["score"]
            rows.append((eval_dir.name, tool, s, ratio))
    if args.markdown:
        header = "| eval | tool | evaluations | answered | valid | score |"
        sep = "|---|---|---|---|---|---|"
        if args.against:
            header += f" score / {args.against} |"
            sep += "---|"
        print(header)
        print(sep)
    ok = True
    for eval_name, tool, s, ratio in rows:
        score = f"{s['score']:.4g}" if s["score"] else "-"
        ratio_text = f"{ratio:.2f}" if ratio is not None else "-"
        if args.markdown:
            line = f"| {eval_name} | {tool} | {s['evaluations']} | {s['answered']} | {s['valid']} | {score} |"
            if args.against:
                line += f" {ratio_text} |"
            print(line)
        else:
            print(
                f"{eval_name:9} {tool:20} evaluations {s['evaluations']:4}  answered {s['answered']:4}  "
                f"valid {s['valid']:4}  invalid {s['invalid']:3}  score {score:>10}"
                + (f"  ratio {ratio_text}" if args.against and tool != args.against else "")
            )
        for function, desc, error in s["failed"][:3]:
            print(f"    failed: {function} {desc}: {error[:300]}", file=sys.stderr)
        for function, desc, error in s["invalid_errors"][:3]:
            print(f"    invalid: {function} {desc}: {error[:300]}", file=sys.stderr)
        if s["answered"] != s["evaluations"] or s["invalid"] > 0 or s["valid"] != s["evaluations"]:
            ok = False
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
