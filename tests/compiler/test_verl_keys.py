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


# verl's renames of a key it logs on every step, read from its history (the keys of verl/trainer/ppo and
# verl/workers at the tags v0.1 to v0.7 and 0.9.1's source): the older key -> the one verl logs now.
RENAMES = {
    **{f"timing/{stage}": f"timing_s/{stage}" for stage in ("gen", "ref", "values", "adv", "update_critic",
                                                            "update_actor", "testing")},  # v0.2
    "mfu/actor": "perf/mfu/actor", "mfu/critic": "perf/mfu/critic",  # v0.3
    "actor/entropy_loss": "actor/entropy",  # v0.4
    "critic/kl": "actor/reward_kl_penalty", "critic/kl_coeff": "actor/reward_kl_penalty_coeff",  # v0.4
    "actor/mfu": "perf/mfu/actor", "critic/mfu": "perf/mfu/critic",  # v0.7's worker-side name
    **{f"perf/{memory}": f"actor/perf/{memory}"  # v0.8: prefixed by the role
       for memory in ("max_memory_allocated_gb", "max_memory_reserved_gb", "cpu_memory_used_gb")},
}


def test_every_rename_in_verls_history_reads_the_older_key_as_the_newer():
    key_map = CATALOG.verl_key_map()
    assert {old: key_map[old].name for old in RENAMES if old in key_map} == \
        {old: key_map[new].name for old, new in RENAMES.items()}
    assert set(RENAMES.values()) <= VERL_091_KEYS
