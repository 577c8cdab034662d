"""The catalog's verl keys against those verl 0.9.1 logs (tests/data/verl-0.9.1-keys.txt, read from its
source), without network access: a key verl renamed shows up here, not as a panel reading "No data"."""

from conftest import REPO

from dashgen.catalog import CATALOG, Origin
from dashgen.framework_keys import VERL

VERL_091_KEYS = frozenset(line.strip() for line in (REPO / "tests/data/verl-0.9.1-keys.txt").read_text().splitlines()
                          if line.strip() and not line.startswith("#"))
# Keys of the catalog's verl metrics that are other frameworks' (their readers name them onto the catalog).
OTHER_FRAMEWORKS = {
    "critic/score/std": "TRL's reward_std (dashgen/formats/trl.py)",
    "frac_reward_zero_std": "TRL's",
    "reward/solve_none": "prime-rl's",
    "reward/solve_all": "prime-rl's",
    "sampling/sampling_logp_difference/mean": "TRL's",
    "sampling/sampling_logp_difference/max": "TRL's",
    "sampling/importance_sampling_ratio/min": "TRL's",
    "sampling/importance_sampling_ratio/mean": "TRL's",
    "sampling/importance_sampling_ratio/max": "TRL's",
}
# verl keys the catalog keeps for older versions that 0.9.1 no longer logs.
GONE_IN_091 = {
    "timing_s/gen_max": "REMAX's greedy baseline is generated in the same call as the samples (RayPPOTrainer.fit): "
                        "timed within timing_s/gen",
}


def test_every_verl_metric_of_the_catalog_is_read_under_a_key_verl_091_logs():
    unknown = {}
    for metric in CATALOG.values():
        if metric.origin is not Origin.VERL or not metric.verl_keys:
            continue
        keys = set(metric.verl_keys)
        if keys & VERL_091_KEYS or keys & (OTHER_FRAMEWORKS.keys() | GONE_IN_091.keys()):
            continue
        unknown[metric.name] = metric.verl_keys
    assert unknown == {}, "catalog keys verl 0.9.1 does not log: add the name it logs as an alias"


def test_the_keys_said_gone_or_another_frameworks_are_indeed_not_verl_091s():
    assert not (OTHER_FRAMEWORKS.keys() | GONE_IN_091.keys()) & VERL_091_KEYS
    catalog_keys = {key for metric in CATALOG.values() for key in metric.verl_keys}
    assert (OTHER_FRAMEWORKS.keys() | GONE_IN_091.keys()) <= catalog_keys


def test_the_keys_verl_runs_are_expected_to_log_are_verl_091s():
    assert VERL.checked_against == "verl 0.9.1"
    assert VERL.recognised_by <= VERL_091_KEYS
    for entry in VERL.expected:
        assert entry.key in VERL_091_KEYS, entry.key
