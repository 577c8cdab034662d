"""What each framework logs on every training step by default, read from its source: the keys a run of
it is expected to log (VerlSignalNeverLogged, alerts/signals.py; followed by
dashgen/sources/expected_keys.py).

"Expected" means, for each framework below: a key the framework logs on every training step under its
default configuration, as its source says at the release named in `checked_against`; a key logged only
where a feature is on (a critic, rollout correction) is expected only once the run logs a key that
shows the feature on (`when`). A run is taken for a framework's once it has logged every key of its
`recognised_by`. A framework with no entry here (a hand-written loop) expects nothing.
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

# TRL's GRPOTrainer (and Unsloth's, a patched copy of it), as dashgen/formats/trl.py names its keys. Only
# what every release since GRPOTrainer's first (0.14) logs on every logged step without an option:
# `kl` only where beta is not 0 (0 by default since 0.19), `frac_reward_zero_std` since 0.18, `entropy`
# since 0.20, `grad_norm` only where transformers has one to log.
TRL = FrameworkKeys(
    framework="TRL",
    # reward_std (GRPOTrainer) beside transformers' epoch (every Trainer log): the hand-written loops of
    # the real-run corpus log a reward spread but no epoch, verl neither.
    recognised_by=frozenset({"critic/score/std", "training/epoch"}),
    expected=(
        Expected("critic/score/mean", note="TRL's `reward`"),
        Expected("critic/score/std", note="TRL's `reward_std`"),
        Expected("response_length/mean", note="TRL's `completions/mean_length`, `completion_length` before 0.17"),
        Expected("actor/pg_loss", note="transformers' `loss`"),
    ),
    checked_against="trl 0.14.0 to 1.9.0",
)

FRAMEWORKS = (VERL, TRL)
