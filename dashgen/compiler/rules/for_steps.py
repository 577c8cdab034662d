"""`for_=steps(N)`: an alert's `for` counted in the run's steps, compiled into its expression.

A condition that compares one logged series with a number (`Signal("response_length/mean")
.above(921.6)`) has held on each of the run's last N steps exactly when the lowest of the series'
last N logged values is above the number (the highest, for `below`). The exporter computes that
from the step log (dashgen/sources/step_statistics.py, once the series is logged on all N steps),
so the alert reads one recording of one line beside its condition: no rhythm, no bands.

Any other condition (a baseline, a reduction, several signals, a validation family's members, a
source without a step log) compiles to PromQL: its truth recorded per run at each evaluation, and
its minimum over the time the run's rhythm gives N steps (ConditionCompiler.held_for_steps, dashgen/compiler/rules/step_windows.py).
"""

from __future__ import annotations

from dashgen.compiler.rules.condition_compiler import ConditionCompiler, resolve_signal
from dashgen.compiler.rules.reductions import promql_number
from dashgen.conditions import Compare, Condition, Steps
from dashgen.model import ON_RUN
from dashgen.sources.step_statistics import FAMILIES

# The extreme of a series' last N values that is beyond a number when every one of them is.
_EXTREME_BEYOND = {">": "min", "<": "max"}


def held_for_steps(compiler: ConditionCompiler, condition: Condition, expr: str, alert: str, for_steps: Steps,
                   where: str) -> str:
    """`expr` (the compiled `condition`), once it has held on each of the run's last `for_steps` steps."""
    held = _held_by_exporter(compiler, condition, for_steps, where)
    if held is None:
        return compiler.held_for_steps(expr, alert, for_steps)
    return f"({expr})\nand on({ON_RUN})\n({held})"


def _held_by_exporter(compiler: ConditionCompiler, condition: Condition, for_steps: Steps, where: str) -> str | None:
    """The condition on the exporter's extreme of the series over the steps; None where it has none."""
    if not isinstance(condition, Compare) or condition.baseline is not None or condition.signal.reduction:
        return None
    extreme = _EXTREME_BEYOND.get(condition.op)
    series = resolve_signal(condition.signal.ref, compiler.catalog, where)
    # A labelled family (a validation family) has one statistic a member, and the alert's condition
    # holds for a run while any member's does: that is the PromQL form's to judge.
    if extreme is None or not compiler.computes_step_windows(series) or series.metric.name in FAMILIES:
        return None
    recorded = compiler.step_reduction(series, extreme, for_steps, fully_logged=True)
    return f"{recorded} {condition.op} {promql_number(condition.value)}"
