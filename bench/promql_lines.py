"""Lines of compiled PromQL per alert: what a person reads in Prometheus' or Grafana's rule view.

    .venv/bin/python bench/promql_lines.py [--before REF]

For each alert of this checkout's rendered/rules/, and of a team project with issue 53's one-line
condition (`Signal("response_length/mean").above(921.6)`, `for_=steps(5)`, built by `dashgen
init` and `dashgen build` with this checkout's code): the lines of the alert rule's expression and
of it with every recording it reads, directly or through another, each once
(dashgen/compiler/rules/promql_lines.py). With --before REF, the same of REF: its committed
rendered/rules/, and the team project built with REF's code (a `git archive` of it, on
PYTHONPATH before this checkout's install). Goal (issue 53): the team condition under 20 lines.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from dashgen.compiler.rules.promql_lines import AlertSize, sizes_of

REPO = Path(__file__).resolve().parent.parent
GOAL_LINES = 20
TEAM_ALERT = "TeamResponseTooLong"
TEAM_MODULE = '''from dashgen.conditions import Signal, steps
from dashgen.model import Alert, RuleGroup, Severity


def rules(config):
    return RuleGroup("team-length", (Alert.when(
        "TeamResponseTooLong", Signal("response_length/mean").above(921.6), for_=steps(5),
        severity=Severity.WARNING, summary="Responses stayed long."),))
'''
# The packages the wheel maps from the repository's folders (pyproject.toml's package-dir).
PACKAGE_DIRS = {"dashgen": "dashgen", "dashgen_alerts": "alerts", "dashgen_panels": "panels",
                "dashgen_rule_tests": "tests/rules", "dashgen_runs": "bench/realruns"}


def sizes_in(rule_files: list[str]) -> list[AlertSize]:
    """The alerts' sizes in rendered rule files (their text)."""
    alerts, recorded = [], {}
    for text in rule_files:
        for group in (yaml.safe_load(text) or {}).get("groups") or []:
            for rule in group["rules"]:
                if "record" in rule:
                    recorded.setdefault(rule["record"], []).append(rule["expr"])
                else:
                    alerts.append((rule["alert"], rule["expr"]))
    return sizes_of(alerts, recorded)


def committed_rule_files(ref: str) -> list[str]:
    listing = subprocess.run(["git", "-C", str(REPO), "ls-tree", "--name-only", ref, "rendered/rules/"],
                             check=True, capture_output=True, text=True).stdout.split()
    return [subprocess.run(["git", "-C", str(REPO), "show", f"{ref}:{path}"], check=True, capture_output=True,
                           text=True).stdout for path in listing if path.endswith(".yaml")]


def team_sizes(workdir: Path, pythonpath: str | None) -> list[AlertSize]:
    """The team project's alert, built by the code on `pythonpath` (None: this checkout's)."""
    env = dict(os.environ, **({"PYTHONPATH": pythonpath} if pythonpath else {}))
    project = workdir / "team"

    def dashgen(*args: str, cwd: Path) -> None:
        subprocess.run([sys.executable, "-m", "dashgen", *args], cwd=cwd, env=env, check=True, capture_output=True)

    dashgen("init", "team", cwd=workdir)
    (project / "alerts" / "team.py").write_text(TEAM_MODULE)
    dashgen("build", cwd=project)
    files = [path.read_text() for path in sorted((project / "rendered" / "rules").glob("*.yaml"))]
    return [size for size in sizes_in(files) if size.alert == TEAM_ALERT]


def code_of(ref: str, workdir: Path) -> str:
    """A PYTHONPATH holding REF's packages, as the wheel names them."""
    tree = workdir / "tree"
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    packages = workdir / "packages"
    packages.mkdir()
    for package, folder in PACKAGE_DIRS.items():
        if (tree / folder).is_dir():
            (packages / package).symlink_to(tree / folder)
    return str(packages)


def measured(ref: str | None) -> list[AlertSize]:
    with tempfile.TemporaryDirectory(prefix="dashgen-promql-lines-") as tmp:
        workdir = Path(tmp)
        if ref is None:
            shipped = sizes_in([path.read_text() for path in sorted((REPO / "rendered" / "rules").glob("*.yaml"))])
            return shipped + team_sizes(workdir, None)
        return sizes_in(committed_rule_files(ref)) + team_sizes(workdir, code_of(ref, workdir))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="a git ref to compare with")
    args = parser.parse_args()
    after = measured(None)
    before = {size.alert: size for size in measured(args.before)} if args.before else {}
    header = f"{'alert':40} {'rule':>6} {'with recordings':>16} {'recordings':>11}"
    print(header + (f"   before: {'rule':>5} {'with recordings':>16}" if before else ""))
    for size in sorted(after, key=lambda s: -s.lines):
        line = f"{size.alert:40} {size.rule_lines:>6} {size.lines:>16} {size.recordings:>11}"
        if size.alert in before:
            line += f"           {before[size.alert].rule_lines:>5} {before[size.alert].lines:>16}"
        print(line)
    print(f"all alerts: {sum(s.rule_lines for s in after)} lines of rules, "
          f"{sum(s.lines for s in after)} with their recordings (a recording read by several counted for each)"
          + (f"; before: {sum(s.rule_lines for s in before.values())} and {sum(s.lines for s in before.values())}"
             if before else ""))
    team = next(size for size in after if size.alert == TEAM_ALERT)
    met = team.lines < GOAL_LINES
    print(f"{TEAM_ALERT} (issue 53's one-line condition): {team.lines} lines with its recordings, goal < {GOAL_LINES}: "
          f"{'met' if met else 'NOT met'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
