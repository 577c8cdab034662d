#!/usr/bin/env python3
"""Backtest every run of this folder with a dashgen checkout and write BASELINE.md.

    python bench/realruns/baseline.py --dashgen-root /work/baseline --commit c1bea5c

For each <run>/steps.jsonl it runs, from the checkout's folder,
    <root>/.venv/bin/dashgen backtest <run>/steps.jsonl --format json [--default-step-time Ns]
(--default-step-time only where run.yaml gives default_step_seconds), keeps the raw JSON
answers in baseline.json and writes the summary tables of BASELINE.md. Standard library only.

A failure counts as caught when a warning or critical alert starts at a logged step between
the onset step and the 10th logged step after it (both included).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.dont_write_bytecode = True  # keep the data folder free of __pycache__
sys.path.insert(0, str(HERE))
from convert import load_yaml  # noqa: E402

SEVERE = ("warning", "critical")
# A fixed start time: without it the backtest starts at the file's mtime minus the run's length,
# which shifts the 1-minute evaluation grid and can move an alert's start by one step.
START = "2025-01-01T00:00:00Z"


def backtest(root: Path, run_dir: Path, meta: dict) -> dict:
    cmd = [str(root / ".venv/bin/dashgen"), "backtest", str(run_dir / "steps.jsonl"), "--format", "json",
           "--start", START]
    if meta.get("default_step_seconds") is not None:
        cmd += ["--default-step-time", f"{int(meta['default_step_seconds'])}s"]
    done = subprocess.run(cmd, cwd=root, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        return {"command": cmd, "error": (done.stderr or done.stdout).strip()[-2000:]}
    return {"command": cmd, "result": json.loads(done.stdout)}


def fired(answer: dict) -> list[dict]:
    out = []
    for alert in answer.get("result", {}).get("alerts", []):
        for f in alert.get("firing", []):
            out.append({"alertname": alert["alertname"], "severity": alert["severity"],
                        "start_step": f["start_step"], "end_step": f["end_step"]})
    return sorted(out, key=lambda a: (a["start_step"] if a["start_step"] is not None else -1, a["alertname"]))


def logged_steps(run_dir: Path) -> list[int]:
    return [json.loads(line)["step"] for line in (run_dir / "steps.jsonl").read_text().splitlines() if line]


def catch(meta: dict, steps: list[int], alerts: list[dict]):
    onset = meta.get("onset_step")
    if meta.get("verdict") != "failure" or onset is None:
        return None
    after = [s for s in steps if s >= onset]
    if not after:
        return {"caught": False, "window": None, "by": []}
    hi = after[min(10, len(after) - 1)]
    by = [a for a in alerts if a["severity"] in SEVERE and a["start_step"] is not None and onset <= a["start_step"] <= hi]
    early = [a for a in alerts if a["severity"] in SEVERE and a["start_step"] is not None and a["start_step"] < onset]
    return {"caught": bool(by), "window": [onset, hi], "by": by, "before_onset": early}


def fmt_alerts(alerts: list[dict]) -> str:
    if not alerts:
        return "none"
    return "; ".join(f"{a['alertname']} ({a['severity']}) @{a['start_step']}" for a in alerts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dashgen-root", type=Path, default=Path("/work/baseline"))
    ap.add_argument("--commit", default="c1bea5c")
    ap.add_argument("ids", nargs="*")
    args = ap.parse_args(argv)
    dirs = sorted(p.parent for p in HERE.glob("*/run.yaml"))
    if args.ids:
        dirs = [d for d in dirs if d.name in args.ids]
    report = {}
    for d in dirs:
        meta = load_yaml(d / "run.yaml")
        answer = backtest(args.dashgen_root.resolve(), d, meta)
        alerts = fired(answer)
        steps = logged_steps(d)
        report[d.name] = {"verdict": meta["verdict"], "onset_step": meta.get("onset_step"),
                          "logged_steps": len(steps), "framework": meta["framework"],
                          "default_step_seconds": meta.get("default_step_seconds"),
                          "command": " ".join(answer["command"][1:]).replace(str(HERE.parent.parent) + "/", ""),
                          "error": answer.get("error"), "alerts": alerts,
                          "catch": catch(meta, steps, alerts)}
        print(f"{d.name}: {fmt_alerts(alerts)}" + (f"  ERROR {answer['error'][:200]}" if answer.get("error") else ""))
    (HERE / "baseline.json").write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    write_md(report, args.commit)
    return 0


def write_md(report: dict, commit: str) -> None:
    healthy = {k: v for k, v in report.items() if v["verdict"] == "healthy"}
    failures = {k: v for k, v in report.items() if v["verdict"] == "failure"}
    h_crit = [k for k, v in healthy.items() if any(a["severity"] == "critical" for a in v["alerts"])]
    h_warn = [k for k, v in healthy.items() if any(a["severity"] == "warning" for a in v["alerts"])]
    caught = [k for k, v in failures.items() if v["catch"] and v["catch"]["caught"]]
    lines = [
        "# Baseline backtest of the real runs",
        "",
        f"Generated by `bench/realruns/baseline.py` against dashgen at commit `{commit}` (a separate",
        "clone, so the file moves in the working tree do not touch it). For every run it ran, from",
        "that checkout:",
        "",
        "    .venv/bin/dashgen backtest /work/main/bench/realruns/<id>/steps.jsonl --format json --start 2025-01-01T00:00:00Z [--default-step-time <S>s]",
        "",
        "with `--default-step-time` only where the run's log has no `timing_s/step` (S is the run's",
        "`default_step_seconds` in run.yaml). `--start` is fixed so that reruns give the same start",
        "steps (the default start, the file's mtime, can shift an alert by one step). Raw answers are",
        "in `baseline.json`.",
        "",
        "A failure counts as caught when a warning or critical alert starts at a logged step from the",
        "onset step through the 10th logged step after it. Info alerts are listed but not counted.",
        "",
        "## Summary",
        "",
        f"- healthy runs: {len(healthy)}; with a critical alert: {len(h_crit)}; with a warning: {len(h_warn)}",
        f"- failures with an onset step: {len(failures)}; caught: {len(caught)}; missed: {len(failures) - len(caught)}",
        "",
        "## Healthy runs",
        "",
        "| run | logged steps | step time | alerts fired (name, severity, start step) |",
        "|---|---|---|---|",
    ]
    for k, v in healthy.items():
        st = f"{v['default_step_seconds']}s (default)" if v["default_step_seconds"] else "from timing_s/step"
        lines.append(f"| {k} | {v['logged_steps']} | {st} | {fmt_alerts(v['alerts'])} |")
    lines += ["", "## Failures", "", "| run | onset | window | caught | alerts fired (name, severity, start step) |", "|---|---|---|---|---|"]
    for k, v in failures.items():
        c = v["catch"] or {}
        w = f"{c['window'][0]}-{c['window'][1]}" if c.get("window") else "-"
        lines.append(f"| {k} | {v['onset_step']} | {w} | {'yes' if c.get('caught') else 'no'} | {fmt_alerts(v['alerts'])} |")
    errors = [k for k, v in report.items() if v.get("error")]
    if errors:
        lines += ["", "## Runs the backtest could not read", ""] + [f"- {k}: {report[k]['error'][:300]}" for k in errors]
    notes = HERE / "baseline_notes.md"
    if notes.exists():
        lines += ["", notes.read_text().rstrip()]
    (HERE / "BASELINE.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
