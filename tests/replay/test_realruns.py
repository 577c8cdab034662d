"""The alerts on real public runs (bench/realruns/): every healthy run stays free of warnings and
criticals, every failure is caught within CATCH_WITHIN logged steps of its onset. A rule change
that breaks a real run fails here, with the run and what fired on it."""

import pytest

from conftest import REPO
from dashgen.replay.corpus import CATCH_WITHIN, judge, load_corpus

pytestmark = [pytest.mark.live, pytest.mark.heavy]

CORPUS = REPO / "bench" / "realruns"
RUNS = load_corpus(CORPUS)


@pytest.fixture(scope="module")
def verdicts():
    return {judged.run.name: judged for judged in judge(RUNS, REPO)}


def test_the_corpus_holds_what_the_issue_asks_for():
    healthy = [run for run in RUNS if run.verdict == "healthy"]
    failures = [run for run in RUNS if run.verdict == "failure"]
    assert len(RUNS) >= 20 and len(failures) >= 8
    long_healthy = [run for run in healthy if len(run.steps_path.read_text().splitlines()) >= 200]
    assert len(long_healthy) >= 6
    for run in RUNS:  # each keeps its raw log and its source beside the converted steps
        meta = (run.steps_path.parent / "run.yaml").read_text()
        assert "source:" in meta and "licence:" in meta, run.name


@pytest.mark.parametrize("name", [run.name for run in RUNS if run.verdict == "healthy"])
def test_a_healthy_real_run_raises_no_warning_or_critical(verdicts, name):
    judged = verdicts[name]
    assert judged.clean, f"{name}: " + ", ".join(f"{f.alertname} ({f.severity}) at step {f.start_step}"
                                                 for f in judged.severe)


@pytest.mark.parametrize("name", [run.name for run in RUNS if run.verdict == "failure"])
def test_a_real_failure_is_caught_within_ten_logged_steps_of_its_onset(verdicts, name):
    judged = verdicts[name]
    assert judged.caught_by is not None, (
        f"{name} ({judged.run.what_failed}; onset at step {judged.run.onset_step}): nothing within "
        f"{CATCH_WITHIN} logged steps; fired: "
        + (", ".join(f"{f.alertname}@{f.start_step}" for f in judged.severe) or "nothing"))
