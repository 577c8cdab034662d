import pytest

from dashgen.catalog import CATALOG
from dashgen.compiler.promql import QueryError, check_expression, substitute_grafana_variables
from dashgen.compiler.selectors import expand_selectors

OK = [
    'verl_actor_ppo_kl{job=~"$job", project=~"$project"}',
    "sum by (instance) (rate(vllm:generation_tokens_total[$__rate_interval]))",
    "histogram_quantile(0.9, sum by (le, instance) (rate(vllm:time_to_first_token_seconds_bucket[5m])))",
    "verl_perf_max_memory_reserved_bytes - verl_perf_max_memory_allocated_bytes",
    "time() - verl_exporter_last_step_timestamp_seconds",
    "max_over_time(verl_actor_ppo_kl[10m]) > 4 * quantile_over_time(0.5, verl_actor_ppo_kl[1h] offset 10m)",
    "ray_node_gpus_utilization < on(job, SessionName) group_left() "
    "0.5 * quantile by (job, SessionName) (0.5, ray_node_gpus_utilization)",
    'label_replace(verl_actor_pg_loss != verl_actor_pg_loss, "metric", "$1", "__name__", "(.+)")',
]


@pytest.mark.parametrize("expr", OK)
def test_valid_expressions_pass(expr):
    check_expression(expr, CATALOG)


@pytest.mark.parametrize("expr, message", [
    ("verl_actor_ppo_kll", "unknown metric 'verl_actor_ppo_kll' (did you mean 'verl_actor_ppo_kl'?)"),
    ('verl_actor_ppo_kl{gpu="0"}', "has no label 'gpu'"),
    ("rate(verl_actor_ppo_kl[5m])", "rate() applied to gauge 'verl_actor_ppo_kl'"),
    ("increase(verl_critic_score_mean[30m])", "increase() applied to gauge"),
    ("irate(vllm:time_to_first_token_seconds[5m])", "needs a histogram's _bucket, _sum or _count"),
    ("histogram_quantile(0.9, verl_actor_ppo_kl)", "histogram_quantile() needs a histogram's _bucket"),
    ("histogram_quantile(0.9, sum by (instance) (rate(vllm:time_to_first_token_seconds_bucket[5m])))",
     "needs the 'le' label"),
    ("sum by (GpuIndex) (verl_actor_ppo_kl)", "names label(s) GpuIndex"),
    ("sum by (job) (verl_actor_ppo_kl) / on(job, experiment) verl_actor_grad_norm", "left side"),
    ("sum(rate(vllm:generation_tokens_total[5m])", "PromQL syntax error"),
    ('{__name__=~"verl_.*"}', "does not name a metric"),
])
def test_violations_are_named(expr, message):
    with pytest.raises(QueryError) as info:
        check_expression(expr, CATALOG)
    assert message in str(info.value)


def test_grafana_variables_are_substituted_before_parsing():
    text = 'rate(x{a=~"$job", b="${project:regex}"}[$__rate_interval]) [[experiment]]'
    assert substitute_grafana_variables(text) == 'rate(x{a=~"var", b="var"}[1m]) var'


def test_named_selectors_expand_inside_braces_only():
    selectors = {"run": 'job=~"$job"', "gpu": 'job="ray"'}
    assert expand_selectors('x{run} + y{gpu, GpuIndex="0"}', selectors) == \
        'x{job=~"$job"} + y{job="ray", GpuIndex="0"}'
    # a label called gpu in a grouping, and braces inside a quoted regex, are left alone
    assert expand_selectors('sum by (gpu) (x{a=~"b{2}"})', selectors) == 'sum by (gpu) (x{a=~"b{2}"})'
    with pytest.raises(QueryError, match="unknown selector 'rnu'"):
        expand_selectors("x{rnu}", selectors)


def test_a_named_selector_is_written_with_a_dollar_and_no_f_string_takes_it_for_a_field():
    selectors = {"run": 'job=~"$job"', "gpu": 'job="ray"', "verl": 'job="verl"'}
    metric = "verl_actor_ppo_kl"
    assert expand_selectors(f'{metric}{{$verl}} > 1 and y{{$gpu, GpuIndex="0"}}', selectors) == \
        'verl_actor_ppo_kl{job="verl"} > 1 and y{job="ray", GpuIndex="0"}'
    # The spelling of projects written before `$`, the same expansion.
    assert expand_selectors('x{$run} + y{gpu}', selectors) == expand_selectors('x{run} + y{$gpu}', selectors)
    # A Grafana variable in a matcher's value is left to Grafana.
    assert expand_selectors('x{$run, experiment=~"$experiment"}', selectors) == \
        'x{job=~"$job", experiment=~"$experiment"}'
    with pytest.raises(QueryError, match=r"unknown selector '\$rnu' in braces; known: \$gpu, \$run, \$verl"):
        expand_selectors("x{$rnu}", selectors)
