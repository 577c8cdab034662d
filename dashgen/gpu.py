"""Per-GPU metrics at scale: where they come from, and the names of their per-node recordings.

A cluster of 1024 GPUs has 1024 series per GPU metric. Dashboards and alerts read them
through recording rules (alerts/gpu.py) that keep one series per node and one per Ray
session, named by Prometheus' `level:metric:operations` convention; only a drill-down into
one node reads the raw per-GPU series. A run is linked to its Ray session by the exporter's
`verl_run_ray_session_info` series (dashgen/runtime/ray_link.py); DCGM's series carry no session,
so with `gpu_source: dcgm` GPU panels and alerts cannot be scoped to a run. Several runs on
one Ray cluster share its session: they are told apart from single-run sessions
(`SHARED_SESSIONS`), not from each other.
"""

from __future__ import annotations


from dataclasses import replace

from dashgen.config import Config
from dashgen.records import record

RUN_SESSION_INFO = "verl_run_ray_session_info"
SESSION_LABEL = "SessionName"
# The exporter's info series, kept only for sessions linked to exactly one run: a join
# `* on(SessionName) group_left(project, experiment)` on it can never match two runs.
RUN_SESSION_LINK = "session:verl_run_ray_session_info:unique"
# Sessions that several runs claim (one Ray cluster shared by several runs): nothing in Ray's
# series says which of its nodes serves which run, so their nodes are compared only within
# themselves, and their alerts name no run.
SHARED_SESSIONS = "session:verl_run_ray_session_info:shared"
# Host memory of a Ray session's fullest node (Ray's node metrics, whatever the GPU source).
HOST_MEMORY_FULLEST = "session:ray_node_mem_used:max"


@record
class GpuSource:
    """The per-GPU series of one exporter (Ray's node metrics or DCGM), as PromQL."""

    utilisation: str  # per-GPU utilisation in percent
    memory_used: str  # per-GPU memory used, in MiB
    memory_free: str  # per-GPU memory free, in MiB: with memory_used, the card's size
    node_labels: str  # the labels all GPUs of one node share
    node_label: str  # the label that names a node (the dashboard's node variable)
    gpu_label: str  # the label that numbers a GPU within its node
    cluster_level: str  # level name of the per-cluster recordings
    cluster_labels: str  # the labels all GPUs of one cluster share
    linked_to_runs: bool  # series carry the Ray session, so they join the run's info series
    job_field: str  # the config field naming the scrape job of these metrics

    def job(self, config: Config) -> str:
        return getattr(config, self.job_field)

    def node(self, metric: str, operation: str) -> str:
        return f"node:{metric}:{operation}"

    def cluster(self, metric: str, operation: str) -> str:
        return f"{self.cluster_level}:{metric}:{operation}"

    @property
    def gpu_name(self) -> str:
        """Alert template text naming one GPU."""
        return f"{{{{ $labels.{self.node_label} }}}} GPU {{{{ $labels.{self.gpu_label} }}}}"

    @property
    def gpu_legend(self) -> str:
        return f"{{{{{self.node_label}}}}} GPU {{{{{self.gpu_label}}}}}"


RAY = GpuSource("ray_node_gpus_utilization", "ray_node_gram_used", "ray_node_gram_available",
                f"job, instance, ip, {SESSION_LABEL}", "ip",
                "GpuIndex", "session", f"job, {SESSION_LABEL}", True, "ray_job")
DCGM = GpuSource("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "job, instance, Hostname",
                 "Hostname", "gpu",
                 "job", "job", False, "dcgm_job")


def gpu_source(config: Config) -> GpuSource:
    if config.gpu_source == "dcgm":
        return DCGM
    # Only dashgen's exporter publishes which Ray session runs a run (verl_run_ray_session_info);
    # with another metric source, Ray's GPUs are shown per job, as DCGM's are.
    return RAY if config.source == "exporter" else replace(RAY, linked_to_runs=False)


def run_join(link_selector: str) -> str:
    """Suffix adding the run's project and experiment to series that carry a Ray session."""
    return f" * on({SESSION_LABEL}) group_left(project, experiment) {RUN_SESSION_LINK}{{{link_selector}}}"
