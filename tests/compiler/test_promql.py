import pytest

from dashgen.catalog import CATALOG
from dashgen.compiler.queries.promql import QueryError, check_expression, substitute_grafana_variables
from dashgen.compiler.queries.selectors import expand_selectors

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


def test_the_selectors_read_are_those_the_parsers_own_walk_finds_in_every_kind_of_node():
    import promql_parser as pp

    from dashgen.compiler.queries.promql import equal_matchers_of, metrics_in

    expressions = [
        'a{job="x"} + on(job) group_left b',                                 # binary, vector selectors
        'max_over_time(c[5m]) > bool 2',                                     # call, matrix selector
        'max_over_time((d{job="x"} - e)[1h:5m])',                            # subquery, parentheses
        'topk(scalar(f), g) or -h',                                          # aggregation's parameter, unary
        'count_values("value", i) unless absent(j{k="v" or k="w"})',         # string parameter, or-matchers
        'label_replace(k{job="y"} offset 5m, "a", "$1", "b", "(.*)")',       # string arguments, offset
        'vector(1) * 2',                                                     # no selector
    ]
    for expr in expressions:
        walked: list = []
        pp.walk(pp.parse(expr), lambda node: walked.append(node) if isinstance(node, pp.VectorSelector) else None)
        assert metrics_in(expr) == {node.name for node in walked}, expr
        for name in {node.name for node in walked}:
            assert equal_matchers_of(expr, name) == [
                {} if node.matchers.or_matchers else
                {m.name: m.value for m in node.matchers.matchers if m.op == pp.MatchOp.Equal}
                for node in walked if node.name == name], expr
    assert metrics_in(expressions[3]) == {"f", "g", "h"}
