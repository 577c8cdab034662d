"""Per-GPU metrics pre-aggregated per node and per cluster, so dashboards and alerts stay
cheap at 1024 GPUs (see dashgen/gpu.py for the names and the run link)."""

from dashgen.config import Config
from dashgen.gpu import HOST_MEMORY_FULLEST, RUN_SESSION_INFO, RUN_SESSION_LINK, SESSION_LABEL, gpu_source
from dashgen.model import Recording, RuleGroup


def rules(config: Config) -> RuleGroup:
    gpu = gpu_source(config)
    util, used = f"{gpu.utilisation}{{gpu}}", f"{gpu.memory_used}{{gpu}}"
    node, cluster = gpu.node_labels, gpu.cluster_labels
    recordings = [
        Recording(gpu.node(gpu.utilisation, "avg"), f"avg by ({node}) ({util})",
                  "Mean utilisation of a node's GPUs, percent"),
        Recording(gpu.node(gpu.utilisation, "min"), f"min by ({node}) ({util})",
                  "Utilisation of a node's least busy GPU, percent: a straggler shows here"),
        Recording(gpu.node(gpu.utilisation, "median"), f"quantile by ({node}) (0.5, {util})",
                  "Median utilisation of a node's GPUs, percent: what VerlGPUStraggler compares each GPU with"),
        Recording(gpu.node(gpu.memory_used, "max"), f"max by ({node}) ({used})",
                  "Memory used on a node's fullest GPU, MiB"),
        Recording(gpu.cluster(gpu.utilisation, "avg"), f"avg by ({cluster}) ({util})",
                  "Mean utilisation of all GPUs of a cluster, percent"),
        Recording(gpu.cluster(gpu.memory_used, "max"), f"max by ({cluster}) ({used})",
                  "Memory used on a cluster's fullest GPU, MiB"),
    ]
    recordings.append(Recording(HOST_MEMORY_FULLEST, f"max by (job, {SESSION_LABEL}) (ray_node_mem_used{{node}})",
                                "Host memory used on a Ray session's fullest node, bytes"))
    info = f"{RUN_SESSION_INFO}{{verl}}"
    recordings.append(Recording(
        RUN_SESSION_LINK, f"{info} and on({SESSION_LABEL}) (count by ({SESSION_LABEL}) ({info}) == 1)",
        "The exporter's run-to-Ray-session link, for sessions that exactly one run claims"))
    return RuleGroup("verl-gpu", tuple(recordings))
