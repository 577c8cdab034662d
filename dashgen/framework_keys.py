"""What each framework logs on every training step by default, read from its source: the keys a run of
it is expected to log (VerlSignalNeverLogged, alerts/signals.py; followed by
dashgen/sources/expected_keys.py).

"Expected" means, for each framework below: a key the framework logs on every training step under its
default configuration, as its source says at the release named in `checked_against`; a key logged only
where a feature is on (a critic, rollout correction) is expected only once the run logs a key that
shows the feature on (`when`). A run is taken for a framework's once it has logged every key of its
`recognised_by`. A framework with no entry here (TRL, Unsloth, a hand-written loop) expects nothing.
Each key is the catalog's first key of its metric (dashgen/catalog.py): an older name of it is an
alias there, and counts as the key.
"""

from __future__ import annotations

from dashgen.records import record


@record
class Expected:
    """A key a framework logs on every training step (the catalog's first key of its metric)."""

    key: str
    # Expected only once the run logs a key starting with one of these (the feature is on); () always.
    when: tuple[str, ...] = ()
    # For the alert's runbook: the setting that logs it, or the feature `when` shows on.
    note: str = ""


@record
class FrameworkKeys:
    framework: str
    # A run that has logged every one of these keys is this framework's.
    recognised_by: frozenset[str]
    expected: tuple[Expected, ...]
    # The release whose source the keys were read from.
    checked_against: str


_CRITIC = ("timing_s/values", "timing_s/update_critic")  # verl times these stages only where a critic runs
_ROLLOUT_CORR = ("rollout_corr/",)  # algorithm.rollout_correction set: verl logs rollout_corr/* every step

VERL = FrameworkKeys(
    framework="verl",
    # compute_data_metrics (verl/trainer/ppo/metric_utils.py) logs them on every step of every verl
    # version; neither TRL nor the hand-written loops of the real-run corpus log them.
    recognised_by=frozenset({"critic/advantages/mean", "critic/returns/mean"}),
    expected=(
        Expected("actor/pg_loss"),
        Expected("actor/pg_clipfrac"),
        Expected("actor/ppo_kl"),
        Expected("actor/grad_norm"),
        Expected("actor/entropy"),  # or actor/entropy_loss, its older name: one series
        Expected("critic/score/mean"),
        Expected("response_length/mean"),
        Expected("response_length/clip_ratio"),
        Expected("timing_s/step"),
        Expected("timing_s/gen"),
        Expected("perf/throughput"),
        Expected("training/global_step"),
        Expected("training/rollout_probs_diff_mean",
                 note="where rollout.calculate_log_probs is True, verl 0.9.1's default since verl PR #6616; "
                      "older versions, and runs that set it False, do not log it"),
        Expected("critic/vf_loss", when=_CRITIC, note="a critic (PPO's GAE)"),
        Expected("critic/vf_explained_var", when=_CRITIC, note="a critic (PPO's GAE)"),
        Expected("rollout_corr/kl", when=_ROLLOUT_CORR, note="rollout correction"),
        Expected("rollout_corr/log_ppl_abs_diff", when=_ROLLOUT_CORR, note="rollout correction"),
        Expected("rollout_corr/chi2_token", when=_ROLLOUT_CORR, note="rollout correction"),
    ),
    checked_against="verl 0.9.1",
)

FRAMEWORKS = (VERL,)
