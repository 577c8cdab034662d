"""The replay engine reports the same alerts as the calendar path it replaced (issue 56: every
sample written, every rule evaluated at every interval of a run's whole span) on every public corpus
run and every simulated run of bench/alert_lifecycle.py, on the rules as they are: names,
severities, labels, start and end steps. Both paths run here, so an alert changed since cannot
leave a recorded answer behind."""

import importlib.util

import pytest

from conftest import REPO

pytestmark = [pytest.mark.live, pytest.mark.heavy, pytest.mark.slow]  # the corpus and 100-odd simulated runs, twice


def _identity():
    spec = importlib.util.spec_from_file_location("replay_identity", REPO / "bench" / "replay_identity.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module._patient_queries()
    return module


def test_every_corpus_run_gets_the_alerts_the_calendar_path_gives():
    identity = _identity()
    calendar, stepped = identity.corpus_alerts(calendar=True), identity.corpus_alerts()
    assert len(stepped) >= 100 and sum(map(len, stepped.values())) > 0
    assert not identity.differences(calendar, stepped)


def test_every_simulated_run_gets_the_alerts_the_calendar_path_gives():
    identity = _identity()
    calendar, stepped = identity.simulated_alerts(calendar=True), identity.simulated_alerts()
    assert len(stepped) >= 90 and sum(map(len, stepped.values())) > 0
    assert not identity.differences(calendar, stepped)
