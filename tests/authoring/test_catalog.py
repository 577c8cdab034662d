import pytest

from dashgen.catalog import CATALOG, MetricType, Origin, VERL_LABELS, verl_metric_name


@pytest.mark.parametrize("key, name, scale", [
    ("actor/ppo_kl", "verl_actor_ppo_kl", 1.0),
    ("actor/entropy", "verl_actor_entropy", 1.0),
    ("actor/grad_norm", "verl_actor_grad_norm", 1.0),
    ("actor/pg_clipfrac", "verl_actor_pg_clipfrac", 1.0),
    ("actor/pg_loss", "verl_actor_pg_loss", 1.0),
    ("actor/kl_loss", "verl_actor_kl_loss", 1.0),
    ("critic/vf_loss", "verl_critic_vf_loss", 1.0),
    ("critic/score/mean", "verl_critic_score_mean", 1.0),
    ("response_length/clip_ratio", "verl_response_length_clip_ratio", 1.0),
    ("response/aborted_ratio", "verl_response_aborted_ratio", 1.0),
    ("training/global_step", "verl_training_global_step", 1.0),
    ("global_seqlen/minmax_diff", "verl_global_seqlen_minmax_diff", 1.0),
    ("perf/total_num_tokens", "verl_perf_total_num_tokens", 1.0),
    ("timing_s/step", "verl_timing_step_seconds", 1.0),
    ("timing_s/update_actor", "verl_timing_update_actor_seconds", 1.0),
    ("timing_per_token_ms/gen", "verl_timing_per_token_gen_seconds", 1e-3),
    ("perf/max_memory_reserved_gb", "verl_perf_max_memory_reserved_bytes", 2.0**30),
    ("val-core/openai/gsm8k/reward/mean@1", "verl_val_core_openai_gsm8k_reward_mean_1", 1.0),
    ("Actor/Weird--Key", "verl_actor_weird_key", 1.0),
])
def test_naming_contract(key, name, scale):
    assert verl_metric_name(key) == (name, scale)


def test_version_aliases_map_onto_one_metric():
    keys = CATALOG.verl_key_map()
    assert keys["actor/entropy"] is keys["actor/entropy_loss"]
    assert keys["actor/entropy"].name == "verl_actor_entropy"
    assert keys["actor/perf/max_memory_reserved_gb"].name == "verl_perf_max_memory_reserved_bytes"


def test_every_verl_metric_is_a_labelled_gauge_from_the_exporter():
    verl = [m for m in CATALOG.values() if m.verl_keys]
    assert len(verl) > 40
    for metric in verl:
        assert metric.type is MetricType.GAUGE
        assert metric.labels == VERL_LABELS
        assert metric.origin is Origin.VERL
        assert verl_metric_name(metric.verl_keys[0])[0] == metric.name


def test_histogram_series_resolve_to_their_metric():
    metric, suffix = CATALOG.resolve("vllm:time_to_first_token_seconds_bucket")
    assert metric.name == "vllm:time_to_first_token_seconds" and suffix == "_bucket"
    assert CATALOG.resolve("verl_actor_ppo_kl_bucket") is None  # a gauge has no buckets
    assert CATALOG.resolve("verl_actor_ppo_k") is None
