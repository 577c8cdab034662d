"""Two synthetic verl runs published through the real rl-insight, as verl's RLInsightLogger does.

Run by tests/end_to_end/test_rl_insight_live.py as a process of its own: a one-CPU Ray (local,
127.0.0.1, usage stats off), `rl_insight.init(project=...)` and, every step, one
`rl_insight.metric_gauge(key.replace("/", "_"), value)` per logged scalar (RLInsightLogger.log in
verl 0.9.1's verl/utils/tracking.py). verl starts one hub per Ray job and labels it with one
run; here both runs share the job's hub and are told apart by the `experiment_name` label that
rl_insight's per-call labels set (they override init's), so one scrape target serves both.

    python rl_insight_publisher.py SERVER_URL HUB_PORT STEP_SECONDS EVENT_AT RAY_TEMP_DIR
"""

import os
import sys
import time
import json

os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
# A worker (the hub actor) asks Ray for its node's address to bind /metrics to: this makes it the
# loopback address, as on a single-machine Ray on macOS, instead of the machine's outward one.
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import ray  # noqa: E402
import rl_insight  # noqa: E402

from dashgen.evaluation.synthetic_runs import step_line  # noqa: E402

RUNS = ("diverging", "healthy")


def hub_status() -> object:
    """What the job's hub actor says of itself (its /metrics address), or why it cannot: for the
    test's message when Prometheus never reaches the hub."""
    from rl_insight.utils.constants import MonitorRayActor
    name = f"{MonitorRayActor.NAME}_{ray.get_runtime_context().get_job_id()}"
    try:
        return ray.get(ray.get_actor(name, namespace=MonitorRayActor.NAMESPACE).get_status.remote(), timeout=60)
    except Exception as error:  # noqa: BLE001 - any failure is the diagnosis
        return f"unavailable: {type(error).__name__}: {error}"


def main() -> None:
    server_url, hub_port, step_seconds, event_at, temp_dir = sys.argv[1:6]
    ray.init(num_cpus=1, include_dashboard=False, _node_ip_address="127.0.0.1", _temp_dir=temp_dir,
             log_to_driver=False, configure_logging=False)
    rl_insight.init(project="gsm8k", config={"server": {"url": server_url},
                                             "prometheus": {"metrics_report_port": int(hub_port)}})
    print("hub:", hub_status(), flush=True)
    step = 0
    while True:
        step += 1
        started = time.monotonic()
        for run in RUNS:
            data = json.loads(step_line(step, run, event_at=int(event_at)))["data"]
            for key, value in data.items():
                try:
                    scalar = float(value)
                except (TypeError, ValueError):
                    continue
                rl_insight.metric_gauge(str(key).replace("/", "_"), scalar, experiment_name=run)
        print(step, flush=True)
        time.sleep(max(0.0, float(step_seconds) - (time.monotonic() - started)))


if __name__ == "__main__":
    main()
