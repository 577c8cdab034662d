"""Benchmark: the dashboard and the rules on 24 h of 1024 GPUs (128 nodes x 8) and 8 verl runs.

Run from the repository root: .venv/bin/python bench/scale_1024.py [--before REF]

1. Generates, streaming, 24 h of Ray node metrics at a 15 s scrape (per-GPU utilisation and
   memory, per-node host memory; per-GPU series with Ray's full label set, 10 labels) for 15
   runs on 128 nodes, every shape of run: five runs of 16 nodes on Ray sessions of their own,
   two runs of 20 nodes sharing one Ray session (one of them hangs, its GPUs idle, for the last
   3 h), and eight single-node runs; with four GPUs that start to lag in the last hours (on a
   16-node run, in the shared session and on a single node) and one that lagged for 30 min and
   recovered; plus the 15 runs' verl step logs (dashgen.evaluation.simulate), exported as
   `dashgen export` would, with each run's `verl_run_ray_session_info` and the step windows the rules
   read (verl_step_statistic). The data ends 10 min
   before now and is backfilled with promtool; from then on a loopback endpoint serves the
   same GPUs and runs live, so rules read the head block, as in a running Prometheus.
2. Fills the recording rules of both rule sets over the 24 h (query_range at each group's
   interval, written back with promtool, level by level, as `dashgen backtest` does).
3. For "before" (the rendered rules and dashboard of git REF, default the last main commit
   before this benchmark existed) and "after" (rendered/ of this checkout): starts Prometheus
   on loopback with those rules, scraping that endpoint, and prints
   - the Prometheus execution time (query stats) and the JSON bytes of a full dashboard refresh
     over 24 h and over the dashboard's default range: every panel query, collapsed rows
     included, variables at All (the Node variable, which has no All, at its first node), at
     the step Grafana picks for a 1000 px wide panel;
   - the rule-cycle time per group (prometheus_rule_group_last_duration_seconds, median of
     six evaluations; groups are evaluated six times as often as their interval says, every 10 s
     for the 1m rule interval, to measure sooner), a group of a longer interval counted for the
     share of cycles it is evaluated at (a 10m group's evaluation a tenth),
     and the samples a cycle reads (each rule's expression queried with stats=all, its
     totalQueryableSamples summed by group): a cost figure that does not move with the
     machine's load, as the times do; with each rule's own execution time (median of five
     queries), summed and the costliest named;
   - the active (pending or firing) alerts by name, against the injected stragglers.
Everything lives in a temporary directory, removed at the end, also on errors and Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import zlib
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator, TextIO

import yaml

from dashgen.compiler.dashboards.dashboard_json import iter_panels
from dashgen.compiler.queries.promql import metrics_in, substitute_grafana_variables
from dashgen.replay.backfill import RecordedRun, Timing, create_blocks, read_run, run_labels
from dashgen.replay.openmetrics import label_text, write_openmetrics
from dashgen.replay.backtest import SERVER_ARGS, load_rules, recorded_openmetrics, recording_levels, serve_tsdb
from dashgen.replay.prometheus_server import PrometheusServer, free_port
from dashgen.evaluation.simulate import RunSpec, write_run
from dashgen.catalog import STEP_STATISTIC_METRIC, STEP_WINDOWS_INFO_METRIC
from dashgen.config import duration_seconds
from dashgen.sources.step_statistics import served_by

REPO = Path(__file__).resolve().parent.parent
DASHBOARD = "dashboards/verl-training.json"

# Nodes of each run: five runs of 16 nodes, two of 20 that share a Ray session, eight single-node runs.
RUN_NODES = (16, 16, 16, 16, 16, 20, 20, 1, 1, 1, 1, 1, 1, 1, 1)
RUNS, GPUS_PER_NODE = len(RUN_NODES), 8
# run -> the run whose Ray session it shares (several runs on one Ray cluster).
SHARES_SESSION_OF = {6: 5}
# run -> hours before the data's end from which it hangs: every GPU of it idles.
HUNG = {5: 3.0}
HOURS = 24
SCRAPE_SECONDS = 15
STEP_SECONDS = 60.0
PANEL_WIDTH_PX = 1000
STEP_WINDOW_FLOOR_SECONDS = 60.0  # the config's step_window_floor
SCRAPE_INTERVAL_FLOOR = 15.0  # the data source's timeInterval: Grafana's smallest step
EVALUATION_SECONDS = 10
LIVE_GAP_SECONDS = 600
# (node, GPU, hours before the data's end from which it lags) -- still lagging now: on 16-node
# runs (nodes 5 and 70), in the shared session (node 101, run 6) and on a single node (122).
STRAGGLERS = ((5, 3, 4.0), (70, 0, 2.0), (101, 6, 1.0), (122, 5, 1.5))
# (node, GPU, from hour, to hour): lagged, then recovered; must not be active now.
RECOVERED = ((40, 2, 6.0, 6.5),)
# main's last commit before GPU scale (issue 11): its rules and dashboard are "before".
BEFORE_REF = "b55823b"
GOALS = {"refresh_seconds": 0.5, "refresh_mb": 30.0, "rule_cycle_ms": 30.0}


# --- The cluster and its metrics ------------------------------------------------------------

@dataclass(frozen=True)
class Node:
    index: int
    run: int

    @property
    def ip(self) -> str:
        return f"10.0.{self.index // 200}.{self.index % 200 + 10}"

    @property
    def labels(self) -> dict[str, str]:
        """A Ray 2.x node's labels: Prometheus' job and instance, Ray's ip and SessionName, and four
        more of realistic length (Ray's per-GPU series add GpuIndex and GpuDeviceName: 10 labels).
        What costs is their number and length, not their names."""
        return {"job": "ray", "instance": f"{self.ip}:8080", "ip": self.ip,
                "SessionName": session_name(session_of(self.run)), "Version": "2.49.1",
                "Component": "reporter_agent", "NodeAddress": self.ip,
                "NodeId": f"{zlib.crc32(self.ip.encode()):08x}" * 7}


def session_of(run: int) -> int:
    return SHARES_SESSION_OF.get(run, run)


def session_name(run: int) -> str:
    return f"session_2026-11-22_00-{run:02d}-00_{123456 + run}_{4000 + run}"


NODES = [Node(index, run) for index, run in enumerate(run for run, count in enumerate(RUN_NODES)
                                                      for _ in range(count))]


def _noise(*key: int) -> float:
    """Deterministic noise in [-1, 1) for (series, time)."""
    return zlib.crc32(repr(key).encode()) / 2**31 - 1.0


def _lagging(node: int, gpu: int, t: float, start: float) -> bool:
    hours = (t - start) / 3600
    return any(node == n and gpu == g and hours >= HOURS - h for n, g, h in STRAGGLERS) or \
        any(node == n and gpu == g and a <= hours < b for n, g, a, b in RECOVERED)


def run_phase(run: int, t: float) -> str:
    """All GPUs of a run are in the same phase: generation, training, or validation (every 2 h)."""
    if (t + run * 600) % 7200 < 360:
        return "validation"
    period = STEP_SECONDS + run * 3
    return "generation" if ((t + run * 17) % period) / period < 0.55 else "training"


_UTILISATION = {"generation": 72.0, "training": 95.0, "validation": 4.0}
_MEMORY_MIB = {"generation": 70_000.0, "training": 62_000.0, "validation": 20_000.0}


def _hung(run: int, t: float, start: float) -> bool:
    return run in HUNG and (t - start) / 3600 >= HOURS - HUNG[run]


def _sample(run: int, phase: str, noise: float, lagging: bool, hung: bool = False) -> tuple[float, float]:
    """(utilisation %, memory used MiB) of one GPU of `run` in `phase`."""
    utilisation = _UTILISATION[phase] + 5 * noise
    if lagging:
        utilisation *= 0.3
    if hung:
        utilisation = 0.0
    return min(max(utilisation, 0.0), 100.0), _MEMORY_MIB[phase] + run * 800 + 400 * noise


def gpu_values(node: Node, gpu: int, t: float, start: float) -> tuple[float, float]:
    return _sample(node.run, run_phase(node.run, t), _noise(node.index, gpu, int(t)),
                   _lagging(node.index, gpu, t, start), _hung(node.run, t, start))


def host_memory_used(node: Node, t: float) -> float:
    return 4.0e11 + 1.0e11 * (0.5 + 0.5 * _noise(node.index, int(t) // 60))


HOST_MEMORY_TOTAL = 2.0e12


def write_cluster(out: TextIO, times: range, start: float, spill: Path) -> int:
    """Every GPU's and node's samples, family by family, each series in time order; returns the count.

    Utilisation goes to `out` as it is computed, memory to `spill`, appended to `out` afterwards
    (a family's samples must be together); nothing is held for more than one series."""
    written = 0
    phases = {run: [run_phase(run, t) for t in times] for run in range(RUNS)}
    odd = {(n, g) for n, g, *_ in (*STRAGGLERS, *RECOVERED)}
    out.write("# TYPE ray_node_gpus_utilization gauge\n")
    with open(spill, "w") as memory_out:
        memory_out.write("# TYPE ray_node_gram_used gauge\n")
        for node in NODES:
            for gpu in range(GPUS_PER_NODE):
                labels = label_text({**node.labels, "GpuIndex": str(gpu), "GpuDeviceName": "NVIDIA H100 80GB HBM3"})
                noise = random.Random(node.index * GPUS_PER_NODE + gpu)
                lagging = ([_lagging(node.index, gpu, t, start) for t in times] if (node.index, gpu) in odd
                           else [False] * len(times))
                samples = [_sample(node.run, phase, 2 * noise.random() - 1, lag, _hung(node.run, t, start))
                           for phase, lag, t in zip(phases[node.run], lagging, times)]
                out.writelines([f"ray_node_gpus_utilization{labels} {u:.1f} {t}\n"
                                for (u, _), t in zip(samples, times)])
                memory_out.writelines([f"ray_node_gram_used{labels} {m:.0f} {t}\n"
                                       for (_, m), t in zip(samples, times)])
                written += 2 * len(times)
    with open(spill) as memory_in:
        shutil.copyfileobj(memory_in, out, 1 << 20)
    spill.unlink()
    for family in ("ray_node_mem_used", "ray_node_mem_total"):
        out.write(f"# TYPE {family} gauge\n")
        for node in NODES:
            prefix = family + label_text(node.labels) + " "
            values = ((host_memory_used(node, t) if family == "ray_node_mem_used" else HOST_MEMORY_TOTAL)
                      for t in times)
            out.writelines([f"{prefix}{value:.0f} {t}\n" for value, t in zip(values, times)])
            written += len(times)
    return written


def session_info_labels(run: RecordedRun, index: int) -> dict[str, str]:
    return {**run.labels, "SessionName": session_name(session_of(index))}


def write_session_info(out: TextIO, runs: list[RecordedRun], times: range) -> int:
    out.write("# TYPE verl_run_ray_session_info gauge\n")
    for index, run in enumerate(runs):
        prefix = "verl_run_ray_session_info" + label_text(session_info_labels(run, index)) + " 1 "
        out.writelines([f"{prefix}{t}\n" for t in times])
    return len(runs) * len(times)


# --- The live endpoint: what Ray's nodes and the exporters serve now ---------------------------

def live_exposition(runs: list[RecordedRun], start: float) -> str:
    now = time.time()
    lines = []
    for node in NODES:
        for gpu in range(GPUS_PER_NODE):
            utilisation, memory = gpu_values(node, gpu, now, start)
            labels = label_text({**node.labels, "GpuIndex": str(gpu), "GpuDeviceName": "NVIDIA H100 80GB HBM3"})
            lines += [f"ray_node_gpus_utilization{labels} {utilisation:.1f}",
                      f"ray_node_gram_used{labels} {memory:.1f}"]
        lines += [f"ray_node_mem_used{label_text(node.labels)} {host_memory_used(node, now):.0f}",
                  f"ray_node_mem_total{label_text(node.labels)} {HOST_MEMORY_TOTAL:.0f}"]
    for index, run in enumerate(runs):
        labels = label_text(run.labels)
        lines += [f"{name}{labels} {value!r}" for name, value in run.values[-1].items() if math.isfinite(value)]
        lines += [f"{STEP_STATISTIC_METRIC}{label_text({**run.labels, 'series': stat.series, 'statistic': stat.name, **dict(member)})} "
                  f"{value!r}" for (stat, member), value in (run.statistics[-1] if run.statistics else {}).items()]
        lines.append(f"{STEP_WINDOWS_INFO_METRIC}{label_text({**run.labels, 'digest': run.step_windows_digest})} 1")
        lines += [f"verl_exporter_last_step_timestamp_seconds{labels} {now}",
                  f"verl_exporter_steps_total{labels} {len(run.steps)}",
                  f"verl_exporter_parse_errors_total{labels} 0",
                  f"verl_run_state{label_text({**run.labels, 'state': 'running'})} 1",
                  f"verl_run_ray_session_info{label_text(session_info_labels(run, index))} 1"]
    return "\n".join(lines) + "\n"


def serve_live(runs: list[RecordedRun], start: float) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            body = live_exposition(runs, start).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


# --- Rules and dashboards of "before" and "after" ---------------------------------------------

@dataclass(frozen=True)
class Variant:
    name: str
    files: dict[str, str]  # path under rendered/ -> text (rules/*.yaml and the dashboard)

    @property
    def dashboard(self) -> dict:
        return json.loads(self.files[DASHBOARD])

    def rule_files(self) -> dict[str, str]:
        return {path: text for path, text in self.files.items() if path.startswith("rules/")}


def rendered_variant(name: str) -> Variant:
    rendered = REPO / "rendered"
    files = {p.relative_to(rendered).as_posix(): p.read_text() for p in rendered.glob("rules/*.yaml")}
    files[DASHBOARD] = (rendered / DASHBOARD).read_text()
    return Variant(name, files)


def git_variant(name: str, ref: str) -> Variant | None:
    def show(path: str) -> str:
        return subprocess.run(["git", "-C", str(REPO), "show", f"{ref}:rendered/{path}"], check=True,
                              capture_output=True, text=True).stdout
    try:
        listing = subprocess.run(["git", "-C", str(REPO), "ls-tree", "--name-only", ref, "rendered/rules/"],
                                 check=True, capture_output=True, text=True).stdout.split()
        files = {path.removeprefix("rendered/"): show(path.removeprefix("rendered/")) for path in listing}
        files[DASHBOARD] = show(DASHBOARD)
    except (subprocess.CalledProcessError, FileNotFoundError) as exc:
        print(f"before: cannot read rendered/ at {ref} ({getattr(exc, 'stderr', '') or exc}); skipped")
        return None
    return Variant(name, files)


def panel_targets(dashboard: dict) -> Iterator[tuple[str, str]]:
    for panel in iter_panels(dashboard):
        for target in panel.get("targets", []):
            yield panel["title"], target["expr"]


def with_fast_groups(text: str) -> str:
    """The rule file with every group evaluated RULE_INTERVAL_SECONDS / EVALUATION_SECONDS times as
    often (only how often, not what): a group of the rule interval every EVALUATION_SECONDS, one of
    10m every ten of them."""
    data = yaml.safe_load(text)
    for group in data["groups"]:
        group["interval"] = f"{fast_interval(group.get('interval', '1m')):g}s"
    return yaml.safe_dump(data, sort_keys=False)


RULE_INTERVAL_SECONDS = 60.0  # the config's rule_interval: a cycle


def fast_interval(interval: str) -> float:
    return duration_seconds(interval) * EVALUATION_SECONDS / RULE_INTERVAL_SECONDS


def group_intervals(rule_files: dict[str, str]) -> dict[str, float]:
    """Each group's interval, in cycles of the rule interval (1 for most, 10 for a 10m group)."""
    return {group["name"]: duration_seconds(group.get("interval", "1m")) / RULE_INTERVAL_SECONDS
            for text in rule_files.values() for group in (yaml.safe_load(text) or {}).get("groups") or []}


def per_cycle(cycle: dict[str, float], intervals: dict[str, float]) -> dict[str, float]:
    """Each group's evaluation time shared out over the cycles between two of its evaluations: what
    it costs a cycle on average (a 10m group's evaluation counts a tenth)."""
    return {group: ms / intervals.get(group, 1.0) for group, ms in cycle.items()}


# --- Grafana's view of a range ------------------------------------------------------------------

_GRAFANA_STEPS_MS = (10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 15000, 20000, 30000, 60000, 120000,
                     300000, 600000, 900000, 1200000, 1800000, 3600000, 7200000, 10800000, 21600000, 43200000)
_GRAFANA_STEP_LIMITS_MS = (15, 35, 75, 150, 350, 750, 1500, 3500, 7500, 12500, 17500, 25000, 45000, 90000,
                           210000, 450000, 750000, 1050000, 1500000, 2700000, 5400000, 9000000, 16200000,
                           32400000, 86400000)


def grafana_step(range_seconds: float) -> float:
    """$__interval of a panel PANEL_WIDTH_PX wide: range / width, rounded as Grafana rounds it."""
    raw_ms = range_seconds * 1000 / PANEL_WIDTH_PX
    step_ms = next((step for step, limit in zip(_GRAFANA_STEPS_MS, _GRAFANA_STEP_LIMITS_MS) if raw_ms < limit),
                   86400000)
    return max(step_ms / 1000, SCRAPE_INTERVAL_FLOOR)


def api(server: PrometheusServer, path: str, params: dict[str, str]) -> tuple[dict, int]:
    """GET /api/v1/<path>: (data, bytes of the response body)."""
    url = f"{server.url}/api/v1/{path}?{urllib.parse.urlencode(params, doseq=True)}"
    try:
        with urllib.request.urlopen(url, timeout=120) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        raise RuntimeError(f"prometheus refused /api/v1/{path} {params}: {exc.read().decode()}") from None
    return json.loads(body)["data"], len(body)


def substitute(expr: str, values: dict[str, str]) -> str:
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: values.get(m.group(1) or m.group(2), m.group(0)), expr)


def variable_values(server: PrometheusServer, dashboard: dict, start: float, end: float) -> dict[str, str]:
    """Each query variable as Grafana would set it: All, or the first value when it has no All."""
    values: dict[str, str] = {}
    for variable in dashboard["templating"]["list"]:
        if variable["type"] != "query":
            continue
        match = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", variable["definition"].strip())
        selector, label = substitute(match.group(1), values), match.group(2)
        found, _ = api(server, f"label/{label}/values", {"match[]": selector, "start": start, "end": end})
        found = sorted(found)
        if variable.get("includeAll"):
            values[variable["name"]] = variable.get("allValue") or \
                "(" + "|".join(regex_escape(value) for value in found) + ")"
        else:
            values[variable["name"]] = regex_escape(found[0]) if found else ""
    return values


def regex_escape(value: str) -> str:
    """A value inside a PromQL regex matcher's string, escaped as Grafana's Prometheus data source does."""
    return re.sub(r"([\\^$*+?.()|{}\[\]])", r"\\\\\1", value)


@dataclass
class Refresh:
    seconds: float = 0.0  # Prometheus' execTotalTime, summed over the queries
    bytes: int = 0
    queries: int = 0
    costliest: list[tuple[float, int, str]] | None = None


def refresh(server: PrometheusServer, dashboard: dict, range_seconds: float, end: float) -> Refresh:
    step = grafana_step(range_seconds)
    # Grafana aligns the range to the step.
    start, end = math.floor((end - range_seconds) / step) * step, math.floor(end / step) * step
    values = variable_values(server, dashboard, start, end)
    values.update({"__interval": f"{step:g}s", "__interval_ms": str(int(step * 1000)),
                   "__rate_interval": f"{max(step + SCRAPE_INTERVAL_FLOOR, 4 * SCRAPE_INTERVAL_FLOOR):g}s",
                   "__range": f"{range_seconds:g}s", "__range_s": f"{range_seconds:g}",
                   "__range_ms": str(int(range_seconds * 1000))})
    result, costs = Refresh(), []
    for title, expr in panel_targets(dashboard):
        data, size = api(server, "query_range", {"query": substitute(expr, values), "start": start, "end": end,
                                                 "step": step, "stats": "all"})
        seconds = data["stats"]["timings"]["execTotalTime"]
        result.seconds += seconds
        result.bytes += size
        result.queries += 1
        costs.append((seconds, size, title))
    result.costliest = sorted(costs, reverse=True)[:4]
    return result


# --- Rules ---------------------------------------------------------------------------------------

def self_metrics(server: PrometheusServer) -> dict[str, float]:
    with urllib.request.urlopen(f"{server.url}/metrics", timeout=30) as response:
        text = response.read().decode()
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line.startswith("prometheus_rule_group_")}


def group_values(metrics: dict[str, float], name: str) -> dict[str, float]:
    pattern = re.compile(rf'{name}{{rule_group="[^"]*;([^"]+)"}}')
    return {match.group(1): value for key, value in metrics.items() if (match := pattern.fullmatch(key))}


def rule_cycle(server: PrometheusServer, evaluations: int = 6, intervals: dict[str, float] | None = None
               ) -> dict[str, float]:
    """Median over `evaluations` of each group's last evaluation time, in ms; a group evaluated less
    often than every cycle (`intervals`, in cycles), over those it had, at least one."""
    intervals = intervals or {}
    samples: dict[str, list[float]] = {}
    seen = group_values(self_metrics(server), "prometheus_rule_group_iterations_total")
    slowest = max(intervals.values(), default=1.0) * EVALUATION_SECONDS
    deadline = time.monotonic() + max(EVALUATION_SECONDS * (evaluations + 3), slowest + 3 * EVALUATION_SECONDS)

    def enough() -> bool:
        wanted = {group: evaluations if intervals.get(group, 1.0) <= 1 else 1 for group in seen}
        return all(len(samples.get(group, ())) >= count for group, count in wanted.items())

    while not enough() and time.monotonic() < deadline:
        time.sleep(2)
        metrics = self_metrics(server)
        iterations = group_values(metrics, "prometheus_rule_group_iterations_total")
        durations = group_values(metrics, "prometheus_rule_group_last_duration_seconds")
        for group, count in iterations.items():
            if count > seen.get(group, 0):
                seen[group] = count
                samples.setdefault(group, []).append(durations[group] * 1000)
    return {group: statistics.median(values) for group, values in sorted(samples.items())}


def rule_samples(server: PrometheusServer, rule_files: dict[str, str], at: float,
                 repeats: int = 5) -> tuple[dict[str, int], list[tuple[float, str]]]:
    """The samples each group's rules read in one evaluation at `at`, by group; and each rule's
    execution time (the median of `repeats` queries at `at`), costliest first."""
    read: dict[str, int] = {}
    timed: list[tuple[float, str]] = []
    for text in rule_files.values():
        for group in (yaml.safe_load(text) or {}).get("groups") or []:
            for rule in group["rules"]:
                seconds = []
                for _ in range(repeats):
                    data, _ = api(server, "query", {"query": rule["expr"], "time": f"{at:.3f}", "stats": "all"})
                    seconds.append(data["stats"]["timings"]["execTotalTime"])
                read[group["name"]] = read.get(group["name"], 0) + data["stats"]["samples"]["totalQueryableSamples"]
                timed.append((statistics.median(seconds), rule.get("record") or rule.get("alert")))
    return dict(sorted(read.items())), sorted(timed, reverse=True)


def wait_for_live_data(server: PrometheusServer, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        data, _ = api(server, "query", {"query": 'up{job="live"} == 1'})
        if data["result"]:
            return
        time.sleep(1)
    raise RuntimeError(f"prometheus did not scrape the live endpoint:\n{server.log_tail()}")


# How far Prometheus' view may lag the clock: one scrape plus one evaluation.
VIEW_LAG_SECONDS = SCRAPE_SECONDS + EVALUATION_SECONDS


def comparable_stragglers(now: float) -> tuple[set[str], set[str]]:
    """The nodes of the injected stragglers the alert must name now, and those it may name.

    A run in its validation phase idles as a whole, so its nodes are not compared (a firing
    alert holds through it; a pending one, as here, drops). A run that entered or left
    validation within Prometheus' view lag may be seen either way."""
    must, may = set(), set()
    for node, _, _ in STRAGGLERS:
        phases = {run_phase(NODES[node].run, at) for at in (now - VIEW_LAG_SECONDS, now)}
        if "validation" not in phases:
            must.add(NODES[node].ip)
        elif len(phases) > 1:
            may.add(NODES[node].ip)
    return must, may


def active_alerts(server: PrometheusServer) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """Active alerts counted by name, and (node ip, state) of each straggler alert."""
    data, _ = api(server, "alerts", {})
    counts: dict[str, int] = {}
    for alert in data["alerts"]:
        counts[alert["labels"]["alertname"]] = counts.get(alert["labels"]["alertname"], 0) + 1
    stragglers = sorted((a["labels"].get("ip", "?"), a["state"]) for a in data["alerts"]
                        if a["labels"]["alertname"] == "VerlGPUStraggler")
    return dict(sorted(counts.items())), stragglers


def wait_for_compaction(server: PrometheusServer, timeout: float = 240) -> None:
    """Overlapping blocks (the recordings over the raw data) are merged by Prometheus' first
    compaction, a minute after start; wait for it so that it does not run while measuring."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"{server.url}/metrics", timeout=30) as response:
            text = response.read().decode()
        merged = re.search(r"^prometheus_tsdb_vertical_compactions_total (\S+)$", text, re.M)
        running = re.search(r"^prometheus_tsdb_compactions_total (\S+)$", text, re.M)
        if merged and float(merged.group(1)) > 0 and running and float(running.group(1)) > 0:
            time.sleep(2)
            return
        time.sleep(2)
    print("  (no compaction seen; measuring anyway)")


# --- The benchmark --------------------------------------------------------------------------------

def build_data(workdir: Path, variants: list[Variant], end: float) -> tuple[list[RecordedRun], int]:
    start = end - HOURS * 3600
    times = range(int(start), int(end) + 1, SCRAPE_SECONDS)
    variants_metrics = set()
    runs_dir = workdir / "runs" / "scale"
    logs = [write_run(RunSpec(f"run-{index}", int(HOURS * 3600 / STEP_SECONDS) - 30, seed=index,
                              step_seconds=STEP_SECONDS), runs_dir / f"run-{index}.jsonl") for index in range(RUNS)]
    expressions = []
    for variant in variants:  # the verl series any rule or panel reads
        recordings, alerts = load_rules(variant.rule_files())
        for rule in [*recordings, *alerts]:
            variants_metrics |= metrics_in(rule.expr)
            expressions.append(rule.expr)
        for _, expr in panel_targets(variant.dashboard):
            variants_metrics |= metrics_in(substitute_grafana_variables(expr))
    # The step windows the exporter computes for any variant's rules (verl_step_statistic).
    served = served_by(expressions, STEP_WINDOW_FLOOR_SECONDS)
    runs = [read_run(log, run_labels(log, "verl"), Timing(end="hung", hold_seconds=0), keep=variants_metrics,
                     now=end, step_statistics=served) for log in logs]
    scraped = workdir / "scraped.om"
    with open(scraped, "w") as out:
        samples = write_cluster(out, times, start, workdir / "memory.om")
        samples += write_session_info(out, runs, times)
        samples += write_openmetrics(runs, out, SCRAPE_SECONDS)
    return runs, samples


def server_config(variant: Variant, workdir: Path, live: ThreadingHTTPServer) -> Path:
    """A Prometheus config of the variant's rules (groups sped up), scraping the live endpoint."""
    rules_dir = workdir / variant.name / "rules"
    rules_dir.mkdir(parents=True)
    for path, text in variant.rule_files().items():
        (rules_dir / Path(path).name).write_text(with_fast_groups(text))
    config = workdir / variant.name / "prometheus.yml"
    config.write_text(yaml.safe_dump({
        "global": {"scrape_interval": f"{SCRAPE_SECONDS}s", "evaluation_interval": f"{EVALUATION_SECONDS}s"},
        "rule_files": [str(rules_dir / "*.yaml")],
        "scrape_configs": [{"job_name": "live", "honor_labels": True,
                            "static_configs": [{"targets": [f"127.0.0.1:{live.server_address[1]}"]}]}]}))
    return config


def measure(variant: Variant, workdir: Path, runs: list[RecordedRun], start: float, first: bool) -> dict:
    live = serve_live(runs, start)
    try:
        config = server_config(variant, workdir, live)
        with PrometheusServer(config, workdir / "tsdb", SERVER_ARGS) as server:
            if first:
                began = time.monotonic()
                wait_for_compaction(server)
                print(f"{variant.name}: compaction of the backfilled blocks settled after "
                      f"{time.monotonic() - began:.0f} s", file=sys.stderr)
            wait_for_live_data(server)
            cycle = per_cycle(rule_cycle(server, intervals=group_intervals(variant.rule_files())),
                              group_intervals(variant.rule_files()))
            samples_read, rule_times = rule_samples(server, variant.rule_files(), time.time())
            alerts, straggler_nodes = active_alerts(server)
            now = time.time()
            expected = comparable_stragglers(now)
            day = refresh(server, variant.dashboard, HOURS * 3600, now)
            # A dashboard without "time" has Grafana's default range, the last 6 hours.
            default_range = duration_of(variant.dashboard.get("time", {}).get("from", "now-6h"))
            default = refresh(server, variant.dashboard, default_range, now)
    finally:
        live.shutdown()
        live.server_close()
    return {"cycle": cycle, "samples_read": samples_read, "rule_times": rule_times, "alerts": alerts, "straggler_nodes": straggler_nodes, "expected": expected, "day": day,
            "default": default, "default_range": default_range}


def duration_of(grafana_from: str) -> float:
    match = re.fullmatch(r"now-(\d+)([smhd])", grafana_from)
    return int(match.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]


def fill_recordings(workdir: Path, variants: list[Variant], start: float, end: float) -> None:
    recordings: dict[str, list] = {}
    for variant in variants:  # "after" last: its rules win where both record a name
        named: dict[str, list] = {}
        for rule in load_rules(variant.rule_files())[0]:  # a name may have several rules (a table's rows)
            named.setdefault(rule.record, []).append(rule)
        recordings.update(named)
    span = RecordedRun(Path("scale_1024"), {}, times=[start], end=end)
    for level, rules in enumerate(recording_levels([rule for rules in recordings.values() for rule in rules])):
        with serve_tsdb(workdir) as server:
            text = recorded_openmetrics(server, rules, [span])
        if text:
            recorded = workdir / f"recorded-{level}.om"
            recorded.write_text(text)
            create_blocks(recorded, workdir / "tsdb", end - start)
            recorded.unlink()


def report(results: dict[str, dict], samples: int, timings: dict[str, float]) -> bool:
    names = list(results)
    print(f"\ndata: {len(NODES)} nodes x {GPUS_PER_NODE} GPUs, {RUNS} verl runs, {HOURS} h at {SCRAPE_SECONDS} s: "
          f"{samples / 1e6:.1f} M samples; " + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items()))
    print(f"{'':44}" + "".join(f"{name:>12}" for name in names) + "        goal")

    def row(label: str, values: list[str], goal: str = "") -> None:
        print(f"{label:44}" + "".join(f"{v:>12}" for v in values) + f"  {goal:>10}")

    for key, label in (("day", f"{HOURS} h refresh"), ("default", "default range refresh")):
        row(f"{label}: Prometheus execution (s)", [f"{results[n][key].seconds:.3f}" for n in names],
            f"<= {GOALS['refresh_seconds']}" if key == "day" else "")
        row(f"{label}: JSON returned (MB)", [f"{results[n][key].bytes / 1e6:.1f}" for n in names],
            f"<= {GOALS['refresh_mb']:g}" if key == "day" else "")
        row(f"{label}: queries", [str(results[n][key].queries) for n in names])
    row("rule cycle, all groups (ms a cycle)", [f"{sum(results[n]['cycle'].values()):.1f}" for n in names],
        f"<= {GOALS['rule_cycle_ms']:g}")
    groups = sorted({g for n in names for g in results[n]["cycle"]})
    for group in groups:
        row(f"  {group} (ms)", [f"{results[n]['cycle'].get(group, float('nan')):.1f}" for n in names])
    row("rule cycle, samples read", [str(sum(results[n]["samples_read"].values())) for n in names])
    for group in groups:
        row(f"  {group} (samples)", [str(results[n]["samples_read"].get(group, 0)) for n in names])
    row("rules queried one by one, summed (ms)",
        [f"{sum(t for t, _ in results[n]['rule_times']) * 1000:.1f}" for n in names])
    alertnames = sorted({a for n in names for a in results[n]["alerts"]})
    row("active alerts (pending or firing)", [str(sum(results[n]["alerts"].values())) for n in names])
    for alertname in alertnames:
        row(f"  {alertname}", [str(results[n]["alerts"].get(alertname, 0)) for n in names],
            straggler_goal(results["after"]["expected"]) if alertname == "VerlGPUStraggler" else "")
    must, may = results["after"]["expected"]
    print("injected stragglers: " + ", ".join(
        f"{NODES[n].ip} GPU {g}" + ("" if NODES[n].ip in must else " (its run in validation: may be named)"
                                    if NODES[n].ip in may else " (its run in validation: not compared)")
        for n, g, _ in STRAGGLERS))
    for name in names:
        print(f"straggler alerts, {name}: "
              + (", ".join(f"{ip} ({state})" for ip, state in results[name]["straggler_nodes"]) or "none"))
    for name in names:
        print(f"costliest queries of the {HOURS} h refresh, {name}: " + "; ".join(
            f"{title} {seconds * 1000:.0f} ms {size / 1e6:.1f} MB" for seconds, size, title in
            results[name]["day"].costliest))
    for name in names:
        print(f"costliest rules, {name}: " + "; ".join(
            f"{rule} {seconds * 1000:.1f} ms" for seconds, rule in results[name]["rule_times"][:8]))
    after = results["after"]
    met = (after["day"].seconds <= GOALS["refresh_seconds"] and after["day"].bytes / 1e6 <= GOALS["refresh_mb"]
           and sum(after["cycle"].values()) <= GOALS["rule_cycle_ms"]
           and straggler_nodes_as_expected(after))
    print(f"goals {'met' if met else 'NOT met'} (after)")
    return met


def straggler_goal(expected: tuple[set[str], set[str]]) -> str:
    must, may = expected
    return f"= {len(must)}" if not may else f"{len(must)}-{len(must) + len(may)}"


def straggler_nodes_as_expected(result: dict) -> bool:
    must, may = result["expected"]
    named = [ip for ip, _ in result["straggler_nodes"]]
    return len(named) == len(set(named)) and must <= set(named) <= must | may


def main() -> int:
    global HOURS
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default=BEFORE_REF, help="git ref whose rendered/ is 'before' ('none': skip)")
    parser.add_argument("--hours", type=int, default=HOURS, help="length of the data set (a quick look: 1)")
    args = parser.parse_args()
    HOURS = args.hours
    variants = [v for v in (None if args.before == "none" else git_variant("before", args.before),
                            rendered_variant("after")) if v is not None]
    timings: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="dashgen-scale-") as tmp:
        workdir = Path(tmp)
        # Ends well before the live scrapes start, as in a running Prometheus whose last minutes
        # are in the head: instant queries then read the head alone, not the backfilled blocks too.
        end = math.floor(time.time() / SCRAPE_SECONDS) * SCRAPE_SECONDS - LIVE_GAP_SECONDS
        start = end - HOURS * 3600
        began = time.monotonic()
        runs, samples = build_data(workdir, variants, end)
        timings["generation"] = time.monotonic() - began
        print(f"generated {samples / 1e6:.1f} M samples in {timings['generation']:.0f} s", file=sys.stderr)
        began = time.monotonic()
        create_blocks(workdir / "scraped.om", workdir / "tsdb", end - start)
        (workdir / "scraped.om").unlink()
        timings["promtool"] = time.monotonic() - began
        print(f"backfilled in {timings['promtool']:.0f} s", file=sys.stderr)
        began = time.monotonic()
        fill_recordings(workdir, variants, start, end)
        timings["recording rules"] = time.monotonic() - began
        print(f"recording rules filled in {timings['recording rules']:.0f} s", file=sys.stderr)
        results = {}
        for variant in variants:
            began = time.monotonic()
            results[variant.name] = measure(variant, workdir, runs, start, first=not results)
            timings[f"measure {variant.name}"] = time.monotonic() - began
    return 0 if report(results, samples, timings) else 1


if __name__ == "__main__":
    sys.exit(main())
