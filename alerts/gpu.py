"""Per-GPU metrics pre-aggregated per node and per cluster, so dashboards and alerts stay
cheap at 1024 GPUs (see dashgen/gpu.py for the names and the run link).

Reading every GPU's series is what costs (at 1024 GPUs, several milliseconds per read), so
each per-GPU metric is read as few times as possible per evaluation: utilisation twice, for
the least busy GPU per node (what a straggler changes) and the median GPU per node (what it
is compared with, on a single node too), memory once, for the fullest GPU per node.
Everything else, the straggler alert included, reads these 128-series recordings.
"""

from dashgen.config import Config
from dashgen.gpu import (HOST_MEMORY_FULLEST, RUN_SESSION_INFO, RUN_SESSION_LINK, SESSION_LABEL, SHARED_SESSIONS,
                         gpu_source)
from dashgen.model import Recording, RuleGroup


def rules(config: Config) -> RuleGroup:
    gpu = gpu_source(config)
    node_memory = gpu.node(gpu.memory_used, "max")
    info = f"{RUN_SESSION_INFO}{{$verl}}"
    return RuleGroup("verl-gpu", (
        Recording(gpu.node(gpu.utilisation, "min"), f"min by ({gpu.node_labels}) ({gpu.utilisation}{{$gpu}})",
                  "Utilisation of a node's least busy GPU, percent: a straggler shows here"),
        Recording(gpu.node(gpu.utilisation, "median"),
                  f"quantile by ({gpu.node_labels}) (0.5, {gpu.utilisation}{{$gpu}})",
                  "Median utilisation of a node's GPUs, percent: what its least busy GPU is compared with"),
        Recording(node_memory, f"max by ({gpu.node_labels}) ({gpu.memory_used}{{$gpu}})",
                  "Memory used on a node's fullest GPU, MiB"),
        Recording(gpu.cluster(gpu.memory_used, "max"), f"max by ({gpu.cluster_labels}) ({node_memory})",
                  "Memory used on a cluster's fullest GPU, MiB"),
        Recording(HOST_MEMORY_FULLEST, f"max by (job, {SESSION_LABEL}) (ray_node_mem_used{{$node}})",
                  "Host memory used on a Ray session's fullest node, bytes"),
        Recording(RUN_SESSION_LINK, f"{info} and on({SESSION_LABEL}) (count by ({SESSION_LABEL}) ({info}) == 1)",
                  "The exporter's run-to-Ray-session link, for sessions that exactly one run claims"),
        Recording(SHARED_SESSIONS, f"count by (job, {SESSION_LABEL}) ({info}) > 1",
                  "Ray sessions that several runs claim: how many; their GPUs cannot be told apart by run"),
    ))
