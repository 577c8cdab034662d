"""What counts as worse in a review, and how the report says it, per run, per alert and per split."""

from pathlib import Path

from dashgen.review.comparison import Review, RunChange
from dashgen.review.judging import Fired, Judged
from dashgen.review.report import COMMENT_LIMIT, Score, format_markdown, format_score, review_json
from dashgen.review.runs import LabelledRun, Verdict

STEPS = list(range(1, 101))


def change(name, verdict, before, after, onset=None, split=None) -> RunChange:
    run = LabelledRun(name, Path(name) / "steps.jsonl", verdict, onset, split=split)
    return RunChange(Judged(run, STEPS, list(before)), Judged(run, STEPS, list(after)))


CLIFF_AT_40 = Fired("Cliff", "critical", 40, None)
DRIFT_AT_40 = Fired("Drift", "warning", 40, None)


def test_what_got_worse():
    assert change("h", Verdict.HEALTHY, [], [DRIFT_AT_40]).regressions == [
        "newly paged by Drift (warning) from step 40"]
    assert change("h", Verdict.HEALTHY, [DRIFT_AT_40], [DRIFT_AT_40]).regressions == []
    assert change("d", Verdict.DEGRADING, [], [DRIFT_AT_40]).regressions == []
    assert change("d", Verdict.DEGRADING, [], [CLIFF_AT_40]).regressions == ["newly paged by Cliff (critical) from step 40"]
    later = Fired("Cliff", "critical", 45, None)
    assert change("f", Verdict.FAILURE, [CLIFF_AT_40], [later], onset=38).regressions == [
        "caught later: +7 logged steps instead of +2"]
    assert change("f", Verdict.FAILURE, [CLIFF_AT_40], [], onset=38).regressions == [
        "no longer caught (was caught +2 logged steps by Cliff)"]
    assert change("f", Verdict.FAILURE, [later], [CLIFF_AT_40], onset=38).improvements == [
        "caught +2 logged steps instead of +7"]
    unlabelled = change("u", None, [], [CLIFF_AT_40])
    assert unlabelled.changed and not unlabelled.regressions and unlabelled.after.result == "unlabelled"


def test_the_report_names_the_runs_an_alert_newly_pages_and_gives_each_split():
    review = Review("HEAD", "working tree", [
        change("calm", Verdict.HEALTHY, [], [CLIFF_AT_40], split="tune"),
        change("crash", Verdict.FAILURE, [CLIFF_AT_40], [CLIFF_AT_40], onset=40, split="holdout"),
        change("raw", None, [], []),
    ])
    text = format_markdown(review)
    assert text.splitlines()[2] == ("**1 run got worse: 3 runs; healthy clean 1 → 0 of 1, failures caught 1 → 1 of 1, "
                                    "median time to catch 0 → 0 logged steps, false critical pages 0 → 1**")
    assert "- `calm` (healthy): newly paged by Cliff (critical) from step 40" in text
    assert "| Cliff | 1 → 2 | 0 → 1 | 1 → 1 | newly pages `calm` |" in text
    assert "| calm | tune | healthy | - | - | **Cliff(c)@40** | clean → paged |" in text
    assert "| raw |" not in text and "| crash |" not in text  # fired the same: counted, not listed
    assert "2 runs fired the same warnings and criticals before and after (each run in `--json`)." in text
    assert "| tune | healthy clean 1/1, failures caught 0/0, false critical pages 0 " \
           "| healthy clean 0/1, failures caught 0/0, false critical pages 1 |" in text
    assert ("| all | healthy clean 1/1, failures caught 1/1, time to catch median 0, p90 0, worst 0 logged steps, "
            "false critical pages 0, unlabelled 1 ") in text
    data = review_json(review)
    assert data["regressed"] and list(data["scores"]) == ["tune", "holdout", "all"]
    assert data["scores"]["holdout"]["after"]["failures_caught"] == 1
    assert data["alerts"] == [{"alertname": "Cliff", "firings": {"before": 1, "after": 2},
                               "pages": {"before": [], "after": ["calm"]},
                               "catches": {"before": ["crash"], "after": ["crash"]}}]


def test_no_change_is_no_difference():
    review = Review("HEAD", "working tree", [change("calm", Verdict.HEALTHY, [DRIFT_AT_40], [DRIFT_AT_40])])
    assert format_markdown(review).splitlines()[2].startswith("**no difference: 1 run;")
    assert not review.regressions


def test_the_score_lists_only_the_runs_asked_for_and_totals_every_run():
    calm = Judged(LabelledRun("calm", Path("calm/steps.jsonl"), Verdict.HEALTHY, None, split="tune"), STEPS, [])
    kept_apart = Judged(LabelledRun("kept-apart", Path("kept-apart/steps.jsonl"), Verdict.HEALTHY, None,
                                    split="holdout"), STEPS, [DRIFT_AT_40])
    text = format_score([calm, kept_apart], lambda one: one.run.split != "holdout")
    assert "calm " in text and "kept-apart" not in text and "Drift" not in text
    assert "holdout: healthy clean 0/1" in text and "all: healthy clean 1/2" in text


def test_the_score_gives_the_time_to_catch_of_the_caught_failures():
    def failure(name: str, start: int | None) -> Judged:
        run = LabelledRun(name, Path(name) / "steps.jsonl", Verdict.FAILURE, 10, 60)
        return Judged(run, STEPS, [] if start is None else [Fired("Cliff", "critical", start, None)])

    # caught 0, 1, 2, 3 and 40 logged steps after the onset at step 10; one missed, which has no time
    judged = [failure(f"f{n}", start) for n, start in enumerate((10, 11, 12, 13, 50, None))]
    score = Score.of(judged)
    assert (score.failures_caught, score.catch_steps_median, score.catch_steps_p90, score.catch_steps_worst) == \
        (5, 2, 40, 40)
    assert Score.of(judged[:4]).catch_steps_median == 1.5
    assert "time to catch median 2, p90 40, worst 40 logged steps" in score.line()
    assert Score.of([failure("missed", None)]).catch_steps_median is None


def _blind(name: str, alerts: dict[str, str]) -> RunChange:
    run = LabelledRun(name, Path(name) / "steps.jsonl", Verdict.HEALTHY, None, split="tune")
    return RunChange(Judged(run, STEPS, []), Judged(run, STEPS, [], dict(alerts)))


def test_an_alert_blind_on_many_runs_is_one_row_with_the_runs_counted():
    why = "could not judge this run: it never logged actor/entropy"
    review = Review("HEAD", "working tree", [_blind(f"run-{n:02}", {"VerlEntropyCollapse": why}) for n in range(40)])
    text = format_markdown(review)
    rows = [line for line in text.splitlines() if line.startswith("| VerlEntropyCollapse |")]
    assert rows == ["| VerlEntropyCollapse | it never logged actor/entropy | 40: `run-00`, `run-01`, `run-02` "
                    "and 37 more |"]


def test_a_corpus_sized_review_fits_a_pull_request_comment_and_names_stay_in_their_cells():
    # 300 runs that each fired differently, blind alerts on each, and names with a pipe and a newline
    runs = [change(f"run|{n:03}\nx" + "-" * 60, Verdict.HEALTHY, [], [Fired(f"Alert{k}", "warning", 40 + k, None)
                                                                      for k in range(8)], split="tune")
            for n in range(300)]
    text = format_markdown(Review("HEAD", "working tree", runs))
    assert len(text) <= COMMENT_LIMIT
    assert "more fired differently: too many for a comment, see `--json`." in text
    table = [line for line in text.splitlines() if line.startswith("| run\\|")]
    assert table and all(line.count(" | ") == 6 for line in table)
