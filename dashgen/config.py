"""Every tunable of the dashboards and rules, in one place.

Defaults live here; a YAML file passed with ``dashgen build --config FILE`` overrides
any of them by field name (unknown names are an error). Durations are Prometheus
duration strings (``90s``, ``10m``, ``1h``).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import yaml

from dashgen.errors import BuildError

GIB = 2**30


@dataclass(frozen=True)
class Config:
    # --- Selectors -------------------------------------------------------------
    # Scrape job of `dashgen export`; every verl_* query and VerlMetricsAbsent use it.
    verl_job: str = "verl"
    # Scrape job of Ray's node metrics (per-GPU utilisation and memory).
    ray_job: str = "ray"
    # Where per-GPU metrics come from: Ray's node metrics or NVIDIA's DCGM exporter.
    gpu_source: Literal["ray", "dcgm"] = "ray"
    # Scrape job of the DCGM exporter, when gpu_source is "dcgm".
    dcgm_job: str = "dcgm"
    # Scrape job of the rollout engines' /metrics (vLLM or SGLang servers).
    rollout_job: str = "rollout"

    # --- Hardware --------------------------------------------------------------
    gpu_memory_bytes: int = 80 * GIB

    # --- Dashboards and Grafana ------------------------------------------------
    dashboard_refresh: str = "30s"
    dashboard_time_from: str = "now-6h"
    grafana_folder: str = "verl"
    datasource_name: str = "Prometheus"
    datasource_uid: str = "dashgen-prometheus"

    # --- Prometheus ------------------------------------------------------------
    # How often Prometheus scrapes the exporter; also the data source's minimum step.
    scrape_interval: str = "15s"
    # Where `dashgen export` listens, as Prometheus should reach it.
    exporter_address: str = "localhost:9464"
    # Ray writes its nodes' metrics endpoints here (verl's rollout monitoring reads the same file).
    ray_service_discovery_file: str = "/tmp/ray/prom_metrics_service_discovery.json"

    # --- Rule evaluation -------------------------------------------------------
    rule_interval: str = "1m"

    # --- VerlTrainingDivergence ------------------------------------------------
    # The baseline is the median over `divergence_baseline_window`, ending
    # `divergence_recent_window` ago; a signal breaks away if it crosses its factor
    # at some point within the recent window.
    divergence_baseline_window: str = "1h"
    divergence_recent_window: str = "10m"
    divergence_kl_factor: float = 4.0
    divergence_grad_norm_factor: float = 4.0
    divergence_entropy_factor: float = 0.5
    divergence_for: str = "2m"
    # Once firing, it stays firing while any one signal is still this far from its held
    # baseline (see baseline_hold_window): a weaker condition than the onset's, so the alert
    # neither resolves while the run is still diverged nor flaps around the threshold.
    divergence_sustain_kl_factor: float = 2.0
    divergence_sustain_grad_norm_factor: float = 2.0
    divergence_sustain_entropy_factor: float = 0.5

    # --- Shared by the baseline-relative alerts ------------------------------------
    # The held baseline is the lowest (for signals a fault raises) or highest (for signals it
    # lowers) rolling baseline of this window: it keeps the pre-fault level for this long
    # after a fault starts, where the rolling median absorbs the fault within about 40 minutes.
    baseline_hold_window: str = "24h"
    # Single-signal conditions read the median of this window, so one odd step neither
    # fires nor resolves them.
    signal_smoothing_window: str = "5m"
    # Warnings stay firing this long after their condition last held: one notification per
    # episode even when the signal dips below the threshold for a step or two.
    warning_keep_firing_for: str = "15m"

    # --- Single-signal warnings --------------------------------------------------
    kl_spike_threshold: float = 0.1
    kl_spike_for: str = "10m"
    entropy_collapse_threshold: float = 0.05
    entropy_collapse_for: str = "10m"
    truncation_threshold: float = 0.1
    truncation_for: str = "15m"
    rollout_abort_threshold: float = 0.05
    rollout_abort_for: str = "10m"

    # --- Rewards -----------------------------------------------------------------
    reward_cliff_baseline_window: str = "1h"
    reward_cliff_recent_window: str = "10m"
    reward_cliff_drop_fraction: float = 0.5
    # The drop must also be at least this much, in the reward's own units: a fraction of a
    # baseline near 0 (signed rewards, +-1) shrinks to nothing. Set it to a few times the
    # step-to-step noise of critic/score/mean.
    reward_cliff_min_drop: float = 0.2
    reward_cliff_for: str = "5m"
    # Once firing, it stays firing while the reward is this fraction of the drop (and of the
    # floor) below its held baseline.
    reward_cliff_sustain_fraction: float = 0.5
    reward_stagnation_window: str = "30m"
    reward_stagnation_min_gain: float = 0.01
    reward_stagnation_for: str = "15m"
    # Once firing, it stays firing while the gain is below this multiple of min_gain.
    reward_stagnation_sustain_factor: float = 2.0

    # --- Progress ----------------------------------------------------------------
    stall_min_silence: str = "15m"
    stall_step_time_factor: float = 3.0
    stall_step_time_window: str = "2h"
    stall_for: str = "1m"
    metrics_absent_for: str = "5m"
    # How long Prometheus remembers the last state of an exporter that is gone: VerlRunCrashed
    # stays firing this long after a crashed run's exporter exits (unless the run restarts),
    # and VerlMetricsAbsent fires for a vanished exporter whose run was still running.
    run_end_memory: str = "24h"

    # --- Memory ------------------------------------------------------------------
    memory_pressure_reserved_fraction: float = 0.92
    memory_pressure_gap_fraction: float = 0.2
    memory_pressure_for: str = "5m"

    # --- Load balance ------------------------------------------------------------
    straggler_factor: float = 0.5
    straggler_min_median_percent: float = 30.0
    straggler_for: str = "15m"
    token_runaway_factor: float = 2.0
    token_runaway_window: str = "1h"
    token_runaway_for: str = "10m"
    # Once firing, it stays firing while tokens are above this multiple of the held baseline.
    token_runaway_sustain_factor: float = 1.5

    # --- Docs ----------------------------------------------------------------------
    # Base of every alert's runbook_url; the alert's anchor is appended.
    runbook_base_url: str = "rendered/docs/alerts.md"

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name.endswith(("_window", "_for", "_interval", "_silence", "_memory")) and not DURATION.fullmatch(str(value)):
                raise BuildError(f"config: {f.name} = {value!r} is not a Prometheus duration (e.g. 90s, 10m, 1h)")
        if self.gpu_source not in ("ray", "dcgm"):
            raise BuildError(f"config: gpu_source = {self.gpu_source!r}; expected 'ray' or 'dcgm'")


DURATION = re.compile(r"(\d+(ms|s|m|h|d|w|y))+")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def duration_seconds(text: str) -> float:
    if not DURATION.fullmatch(text):
        raise ValueError(f"{text!r} is not a Prometheus duration")
    return sum(int(n) * _UNITS[u] for n, u in re.findall(r"(\d+)(ms|s|m|h|d|w|y)", text))


def load_config(path: Path | None) -> Config:
    """Defaults, overridden by the YAML mapping at `path` if given."""
    if path is None:
        return Config()
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise BuildError(f"{path}: cannot read config: {exc}") from exc
    if not isinstance(data, dict):
        raise BuildError(f"{path}: config must be a mapping of field: value")
    known = {f.name for f in dataclasses.fields(Config)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise BuildError(f"{path}: unknown config field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    try:
        return Config(**data)
    except BuildError as exc:
        raise BuildError(f"{path}: {exc}") from exc
    except TypeError as exc:
        raise BuildError(f"{path}: {exc}") from exc
