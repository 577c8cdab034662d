"""Judged runs in words: the corpus score (text), and a review (Markdown for a pull request, or JSON)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable
from typing import TypeVar

from dashgen.records import record
from dashgen.review.comparison import Review, RunChange
from dashgen.review.judging import CATCH_WITHIN, Fired, Judged
from dashgen.review.runs import SPLITS, Verdict

ALL_RUNS = "all"
T = TypeVar("T")


@record
class Score:
    """How the alerts do on a set of runs."""
    healthy: int
    healthy_clean: int
    degrading: int
    degrading_clean: int
    failures: int
    failures_caught: int
    false_critical_pages: int  # runs with a critical where none may fire, or before a failure's onset
    unlabelled: int
    # Time to catch: logged steps from a caught failure's onset to its first catching alert, over the
    # caught failures (None when none is caught). The 90th percentile is the nearest rank.
    catch_steps_median: float | None = None
    catch_steps_p90: int | None = None
    catch_steps_worst: int | None = None

    @staticmethod
    def of(judged: Iterable[Judged]) -> Score:
        judged = list(judged)

        def of_verdict(verdict: Verdict) -> list[Judged]:
            return [j for j in judged if j.run.verdict is verdict]

        healthy, degrading, failures = (of_verdict(v) for v in (Verdict.HEALTHY, Verdict.DEGRADING, Verdict.FAILURE))
        latencies = sorted(j.latency_steps for j in failures if j.latency_steps is not None)
        return Score(len(healthy), sum(j.clean for j in healthy), len(degrading), sum(j.clean for j in degrading),
                     len(failures), sum(j.caught_by is not None for j in failures),
                     sum(any(f.severity == "critical" for f in j.false_pages) for j in judged),
                     sum(not j.run.labelled for j in judged), *_time_to_catch(latencies))

    def line(self) -> str:
        parts = [f"healthy clean {self.healthy_clean}/{self.healthy}"]
        if self.degrading:
            parts.append(f"degrading without a critical {self.degrading_clean}/{self.degrading}")
        parts.append(f"failures caught {self.failures_caught}/{self.failures}")
        if self.catch_steps_median is not None:
            parts.append(f"time to catch median {self.catch_steps_median:g}, p90 {self.catch_steps_p90}, "
                         f"worst {self.catch_steps_worst} logged steps")
        parts.append(f"false critical pages {self.false_critical_pages}")
        if self.unlabelled:
            parts.append(f"unlabelled {self.unlabelled}")
        return ", ".join(parts)


def _time_to_catch(latencies: list[int]) -> tuple[float | None, int | None, int | None]:
    """Median, 90th percentile (nearest rank) and worst of sorted latencies; Nones for none."""
    if not latencies:
        return None, None, None
    middle = len(latencies) // 2
    median = latencies[middle] if len(latencies) % 2 else (latencies[middle - 1] + latencies[middle]) / 2
    return median, latencies[math.ceil(0.9 * len(latencies)) - 1], latencies[-1]


def by_split(items: list[T], split_of: Callable[[T], str | None]) -> dict[str, list[T]]:
    """The items of each split they carry, then all of them."""
    splits = [split for split in SPLITS if any(split_of(item) == split for item in items)]
    return {**{split: [item for item in items if split_of(item) == split] for split in splits}, ALL_RUNS: items}


def scores_by_split(judged: list[Judged]) -> dict[str, Score]:
    """The score of each split the runs carry, then of all runs."""
    return {split: Score.of(picked) for split, picked in by_split(judged, lambda j: j.run.split).items()}


def _fired_text(fired: list[Fired], empty: str = "-") -> str:
    """Each alert once, with its severity's initial and the step it first started at."""
    first: dict[tuple[str, str], int] = {}
    for f in fired:
        first.setdefault((f.alertname, f.severity), f.start_step)
    return ", ".join(f"{name}({severity[:1]})@{step}" for (name, severity), step in first.items()) or empty


def format_score(judged: list[Judged], listed: Callable[[Judged], bool] = lambda judged: True) -> str:
    """Per run that `listed` keeps what fired and when, then the score per split and over all runs
    (bench/realruns.py)."""
    lines = [f"{'RUN':<48} {'SPLIT':<8} {'VERDICT':<9} {'ONSET':>5} {'STEPS':>6}  {'RESULT':<14} FIRED (warning and "
             f"critical: name(severity)@first start step)"]
    for j in filter(listed, judged):
        run = j.run
        lines.append(f"{run.name:<48} {run.split or '-':<8} {run.verdict.value if run.verdict else '-':<9} "
                     f"{'-' if run.onset_step is None else run.onset_step:>5} {len(j.logged_steps):>6}  "
                     f"{j.result:<14} {_fired_text(j.severe)}")
    lines.append("")
    for split, score in scores_by_split(judged).items():
        lines.append(f"{split}: {score.line()}")
    lines.append(f"(a failure is caught by a warning or critical from its onset through its latest_step, or "
                 f"{CATCH_WITHIN} logged steps after the onset)")
    return "\n".join(lines) + "\n"


# --- A review --------------------------------------------------------------------------------

def _runs(count: int) -> str:
    return f"{count} run" + ("" if count == 1 else "s")


def summary_line(review: Review) -> str:
    before = Score.of(change.before for change in review.runs)
    after = Score.of(change.after for change in review.runs)
    regressions = review.regressions
    verdict = (f"{_runs(len(regressions))} got worse" if regressions
               else "no run got worse" if review.changed else "no difference")
    return (f"{verdict}: {_runs(len(review.runs))}; healthy clean {before.healthy_clean} → {after.healthy_clean} of "
            f"{after.healthy}, failures caught {before.failures_caught} → {after.failures_caught} of "
            f"{after.failures}, median time to catch {_steps(before.catch_steps_median)} → "
            f"{_steps(after.catch_steps_median)} logged steps, false critical pages {before.false_critical_pages} → "
            f"{after.false_critical_pages}")


def _steps(count: float | None) -> str:
    return "-" if count is None else f"{count:g}"


@record
class AlertChange:
    """One alert over all runs, before and after."""
    alertname: str
    firings: tuple[int, int]
    pages: tuple[list[str], list[str]]  # runs where it may not fire (healthy; degrading: criticals)
    catches: tuple[list[str], list[str]]  # failures it catches

    @property
    def changed(self) -> bool:
        return (self.firings[0] != self.firings[1] or self.pages[0] != self.pages[1]
                or self.catches[0] != self.catches[1])


def alert_changes(review: Review) -> list[AlertChange]:
    names = sorted({f.alertname for change in review.runs for j in (change.before, change.after) for f in j.fired})

    def side(name: str, pick) -> tuple[int, list[str], list[str]]:
        judged = [pick(change) for change in review.runs]
        return (sum(f.alertname == name for j in judged for f in j.fired),
                [j.run.name for j in judged if any(f.alertname == name for f in j.forbidden)],
                [j.run.name for j in judged if any(f.alertname == name and j.catches(f) for f in j.fired)])

    changes = []
    for name in names:
        before, after = side(name, lambda c: c.before), side(name, lambda c: c.after)
        changes.append(AlertChange(name, (before[0], after[0]), (before[1], after[1]), (before[2], after[2])))
    return changes


def _moves(before: list[str], after: list[str], gained: str, lost: str) -> list[str]:
    """What joined and what left a list of runs, in words."""
    joined = [name for name in after if name not in before]
    left = [name for name in before if name not in after]
    return ([f"{gained} " + _named(joined)] if joined else []) + ([f"{lost} " + _named(left)] if left else [])


def _named(runs: list[str]) -> str:
    """The first few runs by name, the rest counted (a table cell of a pull-request comment)."""
    named = ", ".join(f"`{_cell(run)}`" for run in runs[:NAMED_RUNS])
    return named + (f" and {len(runs) - NAMED_RUNS} more" if len(runs) > NAMED_RUNS else "")


def alert_moves(alert: AlertChange) -> list[str]:
    return (_moves(*alert.pages, "newly pages", "no longer pages")
            + _moves(*alert.catches, "newly catches", "no longer catches"))


def _result(change: RunChange) -> str:
    before, after = change.before.result, change.after.result
    return after if before == after else f"{before} → {after}"


def format_markdown(review: Review) -> str:
    """The review as a pull-request comment: the summary, what got worse, per alert, per run, per split."""
    out = [f"## dashgen review: {review.base_name} → {review.head_name}", "", f"**{summary_line(review)}**", ""]
    if review.regressions:
        out += ["### Got worse", "", *_listed(review.regressions, lambda change: change.regressions), ""]
    improved = [change for change in review.runs if change.improvements]
    if improved:
        out += ["### Got better", "", *_listed(improved, lambda change: change.improvements), ""]
    alerts = alert_changes(review)
    if alerts:
        out += ["### Alerts", "",
                "| alert | firings | runs it pages (healthy: any; degrading: critical) | failures it catches "
                "| what changed |", "|---|---|---|---|---|"]
        for alert in alerts:
            out.append(f"| {alert.alertname} | {alert.firings[0]} → {alert.firings[1]} "
                       f"| {len(alert.pages[0])} → {len(alert.pages[1])} "
                       f"| {len(alert.catches[0])} → {len(alert.catches[1])} "
                       f"| {'; '.join(alert_moves(alert)) or '-'} |")
        out.append("")
    changed = [change for change in review.runs if _fired_differently(change)]
    rows = [_run_row(change) for change in changed]
    tail = _unjudged_table(review) + _split_table(review)
    head_text = "\n".join(out)
    # Rows beyond what a comment holds are counted, not listed (every run is in --json).
    while rows and len(head_text) + sum(len(row) + 1 for row in rows) + sum(len(line) + 1 for line in tail) \
            + 1_000 > COMMENT_LIMIT:
        rows.pop()
    out += ["### Runs that fired differently", ""]
    if rows:
        out += ["Fired: warnings and criticals as name(severity)@first start step; latency in logged steps from the "
                "onset.", "", "| run | split | verdict | onset | fired before | fired after | result |",
                "|---|---|---|---|---|---|---|", *rows, ""]
    if len(rows) < len(changed):
        out += [f"{_runs(len(changed) - len(rows))} more fired differently: too many for a comment, see `--json`.", ""]
    unchanged = len(review.runs) - len(changed)
    out.append(f"{_runs(unchanged)} fired the same warnings and criticals before and after"
               + (" (each run in `--json`)." if unchanged else "."))
    out += tail
    return "\n".join(out) + "\n"


# A pull-request comment holds at most this many characters (GitHub refuses a longer body).
COMMENT_LIMIT = 65_536
# Runs listed under "Got worse" and "Got better": the first of a change that moves many runs say
# what it does; the others are counted (every run is in --json).
LISTED_RUNS = 40
# Runs named in one cell of the could-not-judge table; the rest are counted.
NAMED_RUNS = 3


def _cell(text: str) -> str:
    """Text safe in one Markdown table cell: no pipe, no line break."""
    return text.replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _listed(changes: list[RunChange], reasons: Callable[[RunChange], list[str]]) -> list[str]:
    lines = [f"- `{_cell(change.run.name)}` ({change.run.verdict.value}): {'; '.join(reasons(change))}"
             for change in changes[:LISTED_RUNS]]
    if len(changes) > LISTED_RUNS:
        lines.append(f"- and {_runs(len(changes) - LISTED_RUNS)} more (see `--json`)")
    return lines


def _fired_differently(change: RunChange) -> bool:
    return _fired_text(change.before.severe) != _fired_text(change.after.severe) \
        or change.before.result != change.after.result


def _run_row(change: RunChange) -> str:
    run = change.run
    after, before = _fired_text(change.after.severe), _fired_text(change.before.severe)
    return (f"| {_cell(run.name)} | {run.split or '-'} | {run.verdict.value if run.verdict else 'unlabelled'} "
            f"| {'-' if run.onset_step is None else run.onset_step} | {before} "
            f"| {after if after == before else f'**{after}**'} | {_result(change)} |")


def _split_table(review: Review) -> list[str]:
    splits = by_split(review.runs, lambda change: change.run.split)
    if len(splits) <= 1:
        return []
    return ["", "### Per split", "", "| split | before | after |", "|---|---|---|",
            *(f"| {split} | {Score.of(c.before for c in picked).line()} | {Score.of(c.after for c in picked).line()} |"
              for split, picked in splits.items())]


def _unjudged_table(review: Review) -> list[str]:
    """The alerts that could not judge some runs (after the change), one row per alert and reason,
    the runs counted and the first few named: one line a run repeated for each blind alert was most
    of a corpus review."""
    blind: dict[tuple[str, str], list[str]] = {}
    for change in review.runs:
        for name, why in change.after.unjudged.items():
            blind.setdefault((name, why.split(": ", 1)[-1]), []).append(change.run.name)
    if not blind:
        return []
    out = ["", "### Alerts that could not judge a run (after)", "", "| alert | why | runs |", "|---|---|---|"]
    for (name, why), runs in sorted(blind.items()):
        out.append(f"| {name} | {_cell(why)} | {len(runs)}: {_named(runs)} |")
    return out


def review_json(review: Review) -> dict:
    """The review for machines: the summary, each run before and after, each alert."""
    def judged_json(j: Judged) -> dict:
        return {"result": j.result, "clean": j.clean if j.run.labelled else None,
                "caught_by": j.caught_by.alertname if j.caught_by else None, "latency_steps": j.latency_steps,
                "unjudged": j.unjudged,
                "fired": [{"alertname": f.alertname, "severity": f.severity, "start_step": f.start_step,
                           "end_step": f.end_step} for f in j.fired]}

    return {
        "base": review.base_name, "head": review.head_name, "summary": summary_line(review),
        "regressed": bool(review.regressions), "changed": review.changed,
        "runs": [{"run": c.run.name, "split": c.run.split, "verdict": c.run.verdict.value if c.run.verdict else None,
                  "onset_step": c.run.onset_step, "latest_step": c.run.latest_step,
                  "before": judged_json(c.before), "after": judged_json(c.after),
                  "regressions": c.regressions, "improvements": c.improvements} for c in review.runs],
        "scores": {split: {"before": dataclasses.asdict(Score.of(c.before for c in picked)),
                           "after": dataclasses.asdict(Score.of(c.after for c in picked))}
                   for split, picked in by_split(review.runs, lambda change: change.run.split).items()},
        "alerts": [{"alertname": a.alertname, "firings": {"before": a.firings[0], "after": a.firings[1]},
                    "pages": {"before": a.pages[0], "after": a.pages[1]},
                    "catches": {"before": a.catches[0], "after": a.catches[1]}} for a in alert_changes(review)],
    }
