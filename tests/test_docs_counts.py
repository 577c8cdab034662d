"""Every count the docs give of what the code defines (alerts, rows, corpus runs and their verdicts
and splits, a dashboard's bytes per panel, the runs a review names) is the count the code has now.

A count the docs state is found by the words around it; a page that no longer says it fails here
too, so the sentence is rewritten with the test. Measured figures (times, the benchmarks' results
at a commit, docs/benchmarks.md's record of earlier states) are dated measurements, not counts the
code defines, and are left to the benchmarks.
"""

import collections
import json
import re
import sys

import pytest
import yaml

from conftest import REPO
from dashgen.compiler.dashboards.dashboard_json import iter_panels
from dashgen.compiler.output.targets.grafana import dashboard_to_text
from dashgen.review.report import LISTED_RUNS

sys.path.insert(0, str(REPO / "tests" / "compiler"))
from test_oncall_dashboard import MAX_BYTES_PER_PANEL, MAX_BYTES_PER_PANEL_OF, _opened_as_grafana_does  # noqa: E402

WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
         "ten": 10, "eleven": 11, "twelve": 12}


def _number(text: str) -> int:
    return WORDS[text] if text in WORDS else int(text.replace(",", ""))


def _dashboard(uid: str) -> dict:
    return json.loads((REPO / "rendered" / "dashboards" / f"{uid}.json").read_text())


def _rows(collapsed: bool) -> int:
    """The verl dashboard's rows below "At a glance", open or collapsed."""
    rows = [p for p in _dashboard("verl-training")["panels"] if p["type"] == "row" and p["title"] != "At a glance"]
    return sum(bool(row.get("collapsed")) is collapsed for row in rows)


def _alerts() -> int:
    return sum("alert" in rule for path in (REPO / "rendered" / "rules").glob("*.yaml")
               for group in yaml.safe_load(path.read_text())["groups"] for rule in group["rules"])


def _corpus(field: str = "", value: str = "") -> int:
    runs = [yaml.safe_load(path.read_text()) for path in (REPO / "bench" / "realruns").glob("*/run.yaml")]
    return len(runs) if not field else collections.Counter(run[field] for run in runs)[value]


def _bytes_per_panel(uid: str, opened: bool) -> int:
    model = _dashboard(uid)
    text = dashboard_to_text({**model, "panels": _opened_as_grafana_does(model)}) if opened else \
        (REPO / "rendered" / "dashboards" / f"{uid}.json").read_text()
    return round(len(text.encode()) / len(list(iter_panels(model))))


# (page, what the count says, the words around it with the count as the regex's groups, the code's count)
COUNTS = [
    ("README.md", "open rows", r"the design's (\w+) rows open", lambda: _rows(False)),
    ("README.md", "collapsed rows", r"and the other (\w+) collapsed at the bottom", lambda: _rows(True)),
    ("docs/add-a-panel.md", "open rows", r"of which all but the first (\w+) are collapsed", lambda: _rows(False) + 1),
    ("README.md", "corpus runs", r"how they do on (\d+) real public runs", _corpus),
    ("docs/alerts-over-a-run.md", "corpus runs", r"how they do on (\d+) real public runs", _corpus),
    ("docs/alerts-over-a-run.md", "alerts", r"The (\d+) alerts \(", _alerts),
    ("docs/alerts-over-a-run.md", "corpus runs", r"They are judged on (\d+) real public runs", _corpus),
    ("docs/alerts-over-a-run.md", "corpus runs", r"holds (\d+) public runs", _corpus),
    ("docs/alerts-over-a-run.md", "healthy runs", r"(\d+) healthy \(verl's", lambda: _corpus("verdict", "healthy")),
    ("docs/alerts-over-a-run.md", "degrading runs", r"(\d+) degrading \(a warning",
     lambda: _corpus("verdict", "degrading")),
    ("docs/alerts-over-a-run.md", "failures", r"and (\d+) failures\s+with an onset",
     lambda: _corpus("verdict", "failure")),
    ("docs/alerts-over-a-run.md", "tune runs", r"(\d+) runs to tune on", lambda: _corpus("split", "tune")),
    ("docs/alerts-over-a-run.md", "holdout runs", r"(\d+) held out\.", lambda: _corpus("split", "holdout")),
    ("docs/alerts-over-a-run.md", "tune runs", r"\| tune \((\d+)\) \|", lambda: _corpus("split", "tune")),
    ("docs/alerts-over-a-run.md", "holdout runs", r"\| holdout \((\d+)\) \|", lambda: _corpus("split", "holdout")),
    ("docs/benchmarks.md", "corpus runs", r"the alerts on the (\d+) real public runs", _corpus),
    ("docs/benchmarks.md", "corpus runs", r"s for (\d+) runs \(", _corpus),
    ("docs/review-an-alert-change.md", "runs named", r"the first (\d+) runs\s+named", lambda: LISTED_RUNS),
    ("docs/add-a-panel.md", "bytes per panel", r"([\d,]+) bytes per panel for the verl\s+dashboard as committed",
     lambda: _bytes_per_panel("verl-training", opened=False)),
    ("docs/add-a-panel.md", "bytes per panel, rows open", r"as committed, ([\d,]+) with every row open",
     lambda: _bytes_per_panel("verl-training", opened=True)),
    ("docs/add-a-panel.md", "the test's bound", r"keeps the open form at ([\d,]+) or less", lambda: MAX_BYTES_PER_PANEL),
    ("docs/add-a-panel.md", "compare-runs' bound", r"The compare-runs dashboard is allowed ([\d,]+)",
     lambda: MAX_BYTES_PER_PANEL_OF["verl-compare-runs.json"]),
    ("docs/add-a-panel.md", "compare-runs' bytes", r"allowed [\d,]+ \(it has\s+([\d,]+)\)",
     lambda: _bytes_per_panel("verl-compare-runs", opened=True)),
]


@pytest.mark.parametrize("page, what, words, count", COUNTS, ids=[f"{page}: {what}" for page, what, _, _ in COUNTS])
def test_a_count_the_docs_give_is_the_codes(page, what, words, count):
    found = re.findall(words, (REPO / page).read_text())
    assert found, f"{page} no longer says {words!r}: rewrite the sentence and this test's entry together"
    assert {_number(each) for each in found} == {count()}, f"{page}: {what}"
