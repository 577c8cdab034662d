"""Labelled runs (run.yaml beside a step log) and how a run is judged against its verdict."""

import os
from pathlib import Path

import pytest

from dashgen.errors import BuildError
from dashgen.review.judging import CATCH_WITHIN, Fired, Judged
from dashgen.review.runs import LabelledRun, Verdict, check_steps, find_runs


def run_folder(parent: Path, name: str, meta: str | None, steps_file: str = "steps.jsonl") -> Path:
    folder = parent / name
    folder.mkdir(parents=True)
    (folder / steps_file).write_text('{"step": 1, "data": {"critic/score/mean": 1.0}}\n')
    if meta is not None:
        (folder / "run.yaml").write_text(meta)
    return folder


def test_a_folder_of_runs_reads_each_verdict_and_the_unlabelled_ones(tmp_path):
    run_folder(tmp_path, "a-failure", "verdict: failure\nonset_step: 5\nlatest_step: 9\ncritical: true\nsplit: holdout\n")
    run_folder(tmp_path, "b-degrading", "verdict: degrading\nsplit: tune\ndefault_step_seconds: 30\n"
                                        "critical: null\nlatest_step: null\nsource: {repo: x}\n")
    run_folder(tmp_path, "c-raw-log-only", None)
    run_folder(tmp_path, "d-no-verdict", "source: somewhere\n", steps_file="trainer_state.json")
    runs = {run.name: run for run in find_runs([tmp_path])}
    assert runs["a-failure"] == LabelledRun("a-failure", tmp_path / "a-failure" / "steps.jsonl", Verdict.FAILURE, 5, 9,
                                            True, "holdout")
    assert (runs["b-degrading"].verdict, runs["b-degrading"].split, runs["b-degrading"].step_seconds) == (
        Verdict.DEGRADING, "tune", 30)
    assert not runs["c-raw-log-only"].labelled and not runs["d-no-verdict"].labelled
    assert runs["d-no-verdict"].steps_path.name == "trainer_state.json"
    # A run folder given itself, not its parent, is that one run.
    assert [run.name for run in find_runs([tmp_path / "c-raw-log-only"])] == ["c-raw-log-only"]


@pytest.mark.parametrize("meta, message", [
    ("verdict: [healthy\n", "not YAML"),
    ("verdict: fine\n", "verdict: 'fine'; expected one of healthy, degrading, failure"),
    ("verdict: failure\n", "a failure needs its onset_step"),
    ("verdict: failure\nonset_step: 10\nlatest_step: 5\n", "latest_step 5 comes before onset_step 10"),
    ("verdict: failure\nonset_step: ten\n", "onset_step: 'ten' is not a step number"),
    ("verdict: healthy\nsplit: train\n", "split: 'train'; expected one of tune, holdout"),
    ("verdict: healthy\ncritical: maybe\n", "critical: 'maybe'; expected true or false"),
    ("verdict: healthy\nallow: VerlTrainingStalled\n", "allow: 'VerlTrainingStalled'; expected a list of alert names"),
    ("- a list\n", "expected a mapping"),
    ("a: &a [x, x]\nb: &b [*a, *a]\nc: &c [*b, *b]\nd: &d [*c, *c]\ne: &e [*d, *d]\nf: &f [*e, *e]\n"
     "g: &g [*f, *f]\nh: &h [*g, *g]\nhealthy: [*h, *h]\nverdict: *h\n", "more than 16 aliases"),
    ("verdict: [healthy]\n", "verdict: expected one of healthy, degrading, failure, not a list"),
    ("verdict: healthy\nwhat_failed: {a: 1}\n", "what_failed: expected a text, not a dict"),
    ("verdict: healthy\ndefault_step_seconds: .nan\n", "default_step_seconds: nan is not a number of seconds"),
    ("verdict: healthy\ndefault_step_seconds: 1.0e+308\n", "is not a number of seconds above 0 and at most"),
    ("verdict: failure\nonset_step: -5\n", "onset_step: -5 is not a step number (0 or more)"),
])
def test_a_run_yaml_that_is_not_right_is_one_error_naming_the_file(tmp_path, meta, message):
    run_folder(tmp_path, "run", meta)
    with pytest.raises(BuildError) as error:
        find_runs([tmp_path])
    assert error.value.message.startswith(f"{tmp_path / 'run' / 'run.yaml'}: ")
    assert message in error.value.message


def test_a_run_yaml_without_a_step_log_and_a_folder_without_runs_are_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(BuildError, match="no run folders in it"):
        find_runs([tmp_path / "empty"])
    (tmp_path / "runs" / "orphan").mkdir(parents=True)
    (tmp_path / "runs" / "orphan" / "run.yaml").write_text("verdict: healthy\n")
    with pytest.raises(BuildError, match=r"orphan/run.yaml: the run has no step log beside it"):
        find_runs([tmp_path / "runs"])


def test_an_onset_or_latest_step_beyond_the_last_logged_step_names_the_run_yaml(tmp_path):
    run = LabelledRun("r", tmp_path / "r" / "steps.jsonl", Verdict.FAILURE, onset_step=50)
    with pytest.raises(BuildError) as error:
        check_steps(run, [1, 2, 3])
    assert error.value.message == (f"{tmp_path / 'r' / 'run.yaml'}: onset_step 50 is beyond the run's last logged "
                                   f"step (3, in steps.jsonl)")
    check_steps(LabelledRun("r", tmp_path / "steps.jsonl", Verdict.FAILURE, 3, 3), [1, 2, 3])


STEPS = list(range(0, 100, 5))  # a log of every 5th step


def judged(verdict, *fired: Fired, onset=None, latest=None, critical=False) -> Judged:
    return Judged(LabelledRun("r", Path("r/steps.jsonl"), verdict, onset, latest, critical), STEPS, list(fired))


def test_healthy_allows_info_degrading_allows_warnings_and_neither_a_critical():
    info, warning, critical = Fired("I", "info", 10, None), Fired("W", "warning", 10, None), Fired("C", "critical", 10, 20)
    assert judged(Verdict.HEALTHY, info).clean and not judged(Verdict.HEALTHY, warning).clean
    assert judged(Verdict.DEGRADING, info, warning).clean
    assert judged(Verdict.DEGRADING, warning, critical).forbidden == [critical]


def test_a_failure_is_caught_within_ten_logged_steps_or_its_latest_step():
    at_tenth = Fired("W", "warning", 20 + CATCH_WITHIN * 5, None)
    assert judged(Verdict.FAILURE, at_tenth, onset=20).latency_steps == CATCH_WITHIN
    assert judged(Verdict.FAILURE, Fired("W", "warning", 75, None), onset=20).caught_by is None
    late_but_useful = judged(Verdict.FAILURE, Fired("W", "warning", 90, None), onset=20, latest=95)
    assert late_but_useful.caught_by.alertname == "W" and late_but_useful.latency_steps == 14
    assert judged(Verdict.FAILURE, Fired("W", "warning", 15, None), onset=20).false_pages


def test_a_failure_marked_critical_is_caught_only_by_a_critical():
    warning, critical = Fired("W", "warning", 25, None), Fired("C", "critical", 30, None)
    assert judged(Verdict.FAILURE, warning, onset=20, critical=True).caught_by is None
    assert judged(Verdict.FAILURE, warning, critical, onset=20, critical=True).caught_by == critical


def test_an_allowed_alert_may_fire_on_a_healthy_or_degrading_run(tmp_path):
    from dashgen.review.judging import Fired, Judged

    run_folder(tmp_path, "stalled", "verdict: degrading\nallow: [VerlTrainingStalled]\n")
    [run] = find_runs([tmp_path])
    assert run.allowed == ("VerlTrainingStalled",)
    stall, cliff = Fired("VerlTrainingStalled", "critical", 96, 97), Fired("VerlRewardCliff", "critical", 40, None)
    assert Judged(run, list(range(1, 177)), [stall]).clean
    assert Judged(run, list(range(1, 177)), [stall, cliff]).forbidden == [cliff]


def test_a_dangling_or_huge_label_file_is_an_error_naming_it(tmp_path):
    folder = run_folder(tmp_path, "gone", None)
    (folder / "run.yaml").symlink_to(tmp_path / "nowhere.yaml")
    with pytest.raises(BuildError, match=r"gone/run.yaml: a symlink to nothing"):
        find_runs([tmp_path])
    (folder / "run.yaml").unlink()
    (folder / "run.yaml").write_text("verdict: healthy\n# " + "x" * (1 << 20) + "\n")
    with pytest.raises(BuildError, match=r"gone/run.yaml: larger than 1,048,576 bytes"):
        find_runs([tmp_path])


@pytest.mark.parametrize("content, message", [
    (b"verdict: healthy\n\xff\xfe", "not UTF-8 text (byte 0xff at offset 17): a binary file?"),
    (b"verdict: \x00healthy\n", "a binary file (a NUL byte at offset 9), not text"),
    (None, "cannot be read: Permission denied"),
])
def test_a_binary_or_unreadable_label_file_is_an_error_naming_it(tmp_path, content, message):
    folder = run_folder(tmp_path, "run", None)
    if content is None:
        if os.geteuid() == 0:
            pytest.skip("root reads a file of mode 000")
        (folder / "run.yaml").write_text("verdict: healthy\n")
        (folder / "run.yaml").chmod(0)
    else:
        (folder / "run.yaml").write_bytes(content)
    with pytest.raises(BuildError) as error:
        find_runs([tmp_path])
    assert error.value.message.startswith(f"{folder / 'run.yaml'}: {message}")


def test_a_resumed_runs_replayed_steps_do_not_lengthen_the_catch_window(tmp_path):
    from dashgen.replay.backfill import RecordedRun
    from dashgen.replay.backtest.evaluation import AlertOutcome, Firing, RunOutcome
    from dashgen.review.judging import judged

    # Steps 1-30, then a restart from step 11 logs 11-30 again; the failure starts at 20 and is
    # caught at step 30: the 10th distinct step after the onset, within the default window.
    steps = [*range(1, 31), *range(11, 31)]
    recorded = RecordedRun(tmp_path / "steps.jsonl", {}, steps=steps, times=[60.0 * n for n in range(len(steps))],
                           values=[{} for _ in steps])
    run = LabelledRun("resumed", tmp_path / "steps.jsonl", Verdict.FAILURE, 20)
    outcome = RunOutcome(recorded, [AlertOutcome("VerlRewardCliff", "critical", {}, [Firing(30, None, 1740.0, None)])])
    result = judged(run, outcome)
    assert result.logged_steps == list(range(1, 31))
    assert result.caught_by is not None and result.latency_steps == 10


def test_a_run_folder_may_hold_its_run_as_a_console_log_or_another_record(tmp_path):
    folder = tmp_path / "console-run"
    folder.mkdir()
    (folder / "run.yaml").write_text("verdict: healthy\n")
    (folder / "output.log").write_text("(TaskRunner pid=1) step:1 - actor/pg_loss:0.1\n")
    (folder / "notes.txt").write_text("what we saw\n")
    [run] = find_runs([tmp_path])
    assert run.steps_path == folder / "output.log" and run.verdict is Verdict.HEALTHY
    (folder / "rows.json").write_text('[{"_step": 1, "actor/pg_loss": 0.1}]')
    with pytest.raises(BuildError, match="2 records of a run in it \\(output.log, rows.json\\)"):
        find_runs([tmp_path])


def test_a_run_folder_may_hold_its_run_as_a_folder_of_records(tmp_path):
    """An MLflow run's folder (or a TensorBoard log directory) inside the labelled run's folder."""
    folder = tmp_path / "mlflow-run"
    metrics = folder / "mlruns" / "metrics" / "actor"
    metrics.mkdir(parents=True)
    (metrics / "pg_loss").write_text("1735689600000 0.1 1\n1735689660000 0.2 2\n")
    (folder / "run.yaml").write_text("verdict: healthy\n")
    [run] = find_runs([tmp_path])
    assert run.steps_path == folder / "mlruns" and run.verdict is Verdict.HEALTHY
