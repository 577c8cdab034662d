"""A run's life as the exporter sees it: running, then finished, crashed or stopped (or, for a
supervised trainer that exited 0 without a step in its log, exited_without_steps).

Alerts need to tell a run that ended from one that hangs. The exporter knows the end when
it supervises the trainer (`dashgen export ... -- CMD`: the exit code), or, as a sidecar,
when the log reaches `--total-steps`. It publishes `verl_run_state{state=...}` (1 for the
current state, 0 for the others) and `verl_run_exit_code`; backfill writes the same series
for a recorded run, so backtests judge a run's end the way Prometheus would.

It also counts consecutive steps whose loss or update statistics are not finite: verl skips
the optimizer step when the grad norm is not finite, so one such step is survivable, while a
streak (or a non-finite loss) means the weights are going bad. Counting steps, not seconds,
makes the NaN alerts independent of how long a step takes. A non-finite loss has a streak of
its own, so alerts see it as a number: VictoriaMetrics drops NaN samples at ingestion.
"""

from __future__ import annotations

import enum
import math

from dashgen.catalog import CATALOG, Catalog


class RunPhase(str, enum.Enum):
    RUNNING = "running"
    FINISHED = "finished"  # exit code 0, or the last step (--total-steps) logged
    CRASHED = "crashed"  # the trainer exited non-zero or was killed, not by us
    STOPPED = "stopped"  # the trainer ended after the exporter was asked to stop it (SIGINT/SIGTERM)
    # Exit code 0, but no step was ever logged: it trained nothing (a dry run, a config that ends
    # before the first step), or it logs to another file than the one the exporter follows.
    EXITED_WITHOUT_STEPS = "exited_without_steps"


def phase_after_exit(exit_code: int, stop_requested: bool, logged_steps: bool = True) -> RunPhase:
    """A stop request decides, whatever the code: a trainer that handles SIGTERM may well exit 0."""
    if stop_requested:
        return RunPhase.STOPPED
    if exit_code != 0:
        return RunPhase.CRASHED
    return RunPhase.FINISHED if logged_steps else RunPhase.EXITED_WITHOUT_STEPS


def shell_exit_status(exit_code: int) -> int:
    """Popen's returncode (negative: killed by that signal) as a shell would report it."""
    return 128 - exit_code if exit_code < 0 else exit_code


# Metrics whose non-finite value marks a bad step; the losses are fatal at once. The KL loss to
# the reference is a term of the actor's loss (GRPO's use_kl_loss; TRL's beta * kl): a NaN there
# is a NaN update.
NONFINITE_WATCHED = ("verl_actor_pg_loss", "verl_actor_grad_norm", "verl_actor_ppo_kl", "verl_actor_entropy",
                     "verl_critic_vf_loss", "verl_actor_kl_loss")
NONFINITE_FATAL = ("verl_actor_pg_loss", "verl_critic_vf_loss", "verl_actor_kl_loss")


def watched_keys(catalog: Catalog = CATALOG) -> tuple[str, ...]:
    return tuple(key for name in NONFINITE_WATCHED for key in catalog[name].verl_keys)


def step_is_nonfinite(data: dict, keys: tuple[str, ...]) -> bool:
    """verl's file logger writes NaN and infinities as null (orjson) or as NaN tokens (json)."""
    for key in keys:
        if key in data:
            value = data[key]
            if value is None or (isinstance(value, float) and not math.isfinite(value)):
                return True
    return False


class NonFiniteStreak:
    """Consecutive non-finite steps up to the newest one."""

    def __init__(self, catalog: Catalog = CATALOG):
        self._keys = watched_keys(catalog)
        self._loss_keys = tuple(key for name in NONFINITE_FATAL for key in catalog[name].verl_keys)
        self.steps = 0
        self.loss_steps = 0  # the same for the losses alone (NONFINITE_LOSS_STREAK_METRIC)

    def observe(self, data: dict) -> int:
        self.steps = self.steps + 1 if step_is_nonfinite(data, self._keys) else 0
        self.loss_steps = self.loss_steps + 1 if step_is_nonfinite(data, self._loss_keys) else 0
        return self.steps
