"""The alerts on real public runs (bench/realruns/, judged by dashgen/review as `bench/realruns.py`
and `dashgen review` do): every healthy run stays free of warnings and criticals, every degrading
run free of criticals, every failure is caught within its catch window. A rule change that breaks
a tune run fails here, with the run and what fired on it; the holdout split is judged in totals."""

import pytest

from dashgen.review.comparison import judge
from dashgen.review.corpus import public_corpus
from dashgen.review.judging import CATCH_WITHIN
from dashgen.review.runs import Verdict, find_runs
from conftest import REPO

pytestmark = [pytest.mark.live, pytest.mark.heavy, pytest.mark.slow]  # the whole public corpus backtested

RUNS = find_runs([public_corpus()])


@pytest.fixture(scope="module")
def verdicts():
    return {judged.run.name: judged for judged in judge(RUNS, REPO)}


def test_the_corpus_holds_what_the_issue_asks_for():
    healthy = [run for run in RUNS if run.verdict is Verdict.HEALTHY]
    failures = [run for run in RUNS if run.verdict is Verdict.FAILURE]
    assert len(RUNS) >= 20 and len(failures) >= 8
    long_healthy = [run for run in healthy if len(run.steps_path.read_text().splitlines()) >= 200]
    assert len(long_healthy) >= 6
    for run in RUNS:  # each keeps its raw log and its source beside the converted steps
        meta = run.meta_path.read_text()
        assert "source:" in meta and "licence:" in meta, run.name


# The holdout split is never tuned on (bench/realruns/README.md), so it is judged here as
# bench/realruns.py prints it: in totals, never run by run (a list of what fires on each holdout run
# is what tuning on it starts from). The totals are pinned: a change that moves one, either way,
# fails here, and the pin moves with the change's note. The second holdout (issue 52) before its
# alert changes: healthy clean 11/13, failures caught 4/12.
HOLDOUT_TOTALS = {"healthy runs clean": (11, 13), "failures caught": (8, 12),
                  "degrading runs without a critical": (3, 3), "healthy runs paged critical": (0, 13)}

# Tune runs added to show a class of failure or false alarm the alerts do not yet handle (issue 40,
# item 5): pinned as expected failures that must keep failing (strict) until a rule change (tuned on
# them) fixes them, so a change that fixes one, or breaks another, shows here.
OPEN_ON_TUNE: dict[str, str] = {
    "unsloth-ministral3-3b-sudoku-grpo-kl-spike":
        "the early KL rise to ~1 (steps 5-19) warns as a blow-up",
    "unsloth-gptoss-20b-2048-game-grpo-stopped-432":
        "one-prompt noise warns: the KL growing with the reward at 45, shorter strategies at 376",
    "custom-qwen25math-15b-grpo-masked-normalize-200":
        "the fall to 35-65-token responses on steps 4-13, with reward and validation rising, warns as a length collapse",
    # The spent holdout, in tune since issue 52: what it missed or paged when it moved.
    "trl-qwen25-7b-gsm8k-grpo-rho100-seed43-entropy-blowup":
        "the entropy rise from 25 warns at 40, after the window",
    "unsloth-gemma3-1b-quantqa-grpo-answer-never-pays":
        "an answer reward of -1.0 on every step, with format rewards keeping the total varying: nothing reads it",
    "trl-qwen25-7b-gsm8k-grpo-rho100-seed44-cap-excursion":
        "a 50-step stretch at the length cap warns as truncation at 95, and as saturating truncation at 130",
}


def _names(verdict: Verdict) -> list:
    return [pytest.param(run.name, marks=pytest.mark.xfail(strict=True, reason=OPEN_ON_TUNE[run.name]))
            if run.name in OPEN_ON_TUNE else run.name
            for run in RUNS if run.verdict is verdict and run.split == "tune"]


def test_the_open_runs_are_tune_runs():
    by_name = {run.name: run for run in RUNS}
    assert all(by_name[name].split == "tune" for name in OPEN_ON_TUNE)


def _holdout_totals(verdicts) -> dict[str, tuple[int, int]]:
    holdout = [judged for judged in verdicts.values() if judged.run.split == "holdout"]
    healthy = [judged for judged in holdout if judged.run.verdict is Verdict.HEALTHY]
    degrading = [judged for judged in holdout if judged.run.verdict is Verdict.DEGRADING]
    failures = [judged for judged in holdout if judged.run.verdict is Verdict.FAILURE]
    return {"healthy runs clean": (sum(judged.clean for judged in healthy), len(healthy)),
            "failures caught": (sum(judged.caught_by is not None for judged in failures), len(failures)),
            "degrading runs without a critical": (sum(judged.clean for judged in degrading), len(degrading)),
            "healthy runs paged critical": (sum(any(f.severity == "critical" for f in judged.severe)
                                                for judged in healthy), len(healthy))}


def test_the_holdout_split_scores_its_pinned_totals(verdicts):
    assert _holdout_totals(verdicts) == HOLDOUT_TOTALS


def test_no_healthy_tune_run_gets_a_critical_page(verdicts):
    paged = {name: [f"{f.alertname}@{f.start_step}" for f in judged.severe if f.severity == "critical"]
             for name, judged in verdicts.items()
             if judged.run.verdict is Verdict.HEALTHY and judged.run.split == "tune"}
    assert not any(paged.values()), {name: pages for name, pages in paged.items() if pages}


@pytest.mark.parametrize("name", _names(Verdict.HEALTHY) + _names(Verdict.DEGRADING))
def test_a_healthy_real_run_raises_no_warning_or_critical_and_a_degrading_one_no_critical(verdicts, name):
    judged = verdicts[name]
    assert judged.clean, f"{name} ({judged.run.verdict.value}): " + ", ".join(
        f"{f.alertname} ({f.severity}) at step {f.start_step}" for f in judged.forbidden)


@pytest.mark.parametrize("name", _names(Verdict.FAILURE))
def test_a_real_failure_is_caught_within_its_catch_window(verdicts, name):
    judged = verdicts[name]
    window = judged.catch_window
    assert judged.caught_by is not None, (
        f"{name} ({judged.run.what_failed}; steps {window[0]}-{window[1]}, by default {CATCH_WITHIN} logged steps "
        f"after the onset): nothing caught it; fired: "
        + (", ".join(f"{f.alertname}({f.severity})@{f.start_step}" for f in judged.severe) or "nothing"))
