"""The replay engine reports the same alerts as the engine before issue 56 (which evaluated every
rule at every interval of a run's whole span, from every scrape) on every public corpus run and
every simulated run of bench/alert_lifecycle.py: names, severities, labels, start and end steps.
The fixture was written by bench/replay_identity.py at the issue's starting commit."""

import importlib.util
import json

import pytest

from conftest import REPO

pytestmark = [pytest.mark.live, pytest.mark.heavy, pytest.mark.slow]  # the corpus and 100-odd simulated runs

FIXTURE = REPO / "tests" / "replay" / "fixtures" / "replay_alerts.json"


def _identity():
    spec = importlib.util.spec_from_file_location("replay_identity", REPO / "bench" / "replay_identity.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _differences(recorded: dict, now: dict) -> list[str]:
    return [f"{name}: recorded {recorded.get(name)}, now {now.get(name)}"
            for name in sorted(set(recorded) | set(now)) if recorded.get(name) != now.get(name)]


def test_every_corpus_run_gets_the_alerts_it_got_before():
    recorded = json.loads(FIXTURE.read_text())["corpus"]
    now = json.loads(json.dumps(_identity().corpus_alerts()))  # labels as lists, as the fixture holds them
    assert len(recorded) >= 100 and sum(map(len, recorded.values())) > 0
    assert not _differences(recorded, now)


def test_every_simulated_run_gets_the_alerts_it_got_before():
    recorded = json.loads(FIXTURE.read_text())["simulated"]
    now = json.loads(json.dumps(_identity().simulated_alerts()))
    assert len(recorded) >= 90 and sum(map(len, recorded.values())) > 0
    assert not _differences(recorded, now)
