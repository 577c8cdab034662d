"""Recorded runs replayed on VictoriaMetrics by vmalert, to compare its firing with Prometheus'.

Replay (`vmalert -replay.*`) evaluates every rule over a past range against a running
VictoriaMetrics and writes the recordings and `ALERTS` back to it. Its defaults would read
nothing useful: `-datasource.queryStep` must be the group interval (default 5m), and
`-replay.rulesDelay` longer than the remote-write flush (`-remoteWrite.flushInterval`) plus
the time new samples take to become searchable, or a rule reading an earlier recording of its
group finds it empty.
"""

from __future__ import annotations

import io
import json
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

from dashgen.errors import BuildError
from dashgen.parent_death import die_with_parent_hook
from dashgen.promtool import find_binary
from dashgen.replay.backfill import RecordedRun
from dashgen.replay.openmetrics import write_openmetrics
from dashgen.replay.prometheus_server import PrometheusServer, free_port, stop_process


class VictoriaMetricsServer(PrometheusServer):
    """Single-node VictoriaMetrics on loopback, its data in `storage_dir`, kept for as long as data
    can be old (a backfilled run), reading the newest samples at once."""

    binary = "victoria-metrics"
    ready_path = "/health"

    def __init__(self, storage_dir: Path, ready_timeout: float = 60.0):
        super().__init__(Path("/dev/null"), storage_dir, ready_timeout=ready_timeout)  # it reads no config file

    def arguments(self) -> list[str]:
        return [f"-httpListenAddr=127.0.0.1:{self.port}", f"-storageDataPath={self.storage_dir}",
                "-retentionPeriod=100y", "-search.latencyOffset=0s", "-search.disableCache", "-loggerLevel=ERROR"]

    def import_prometheus_text(self, text: str) -> None:
        """POST samples in Prometheus' text format (timestamps in ms) and make them searchable."""
        request = urllib.request.Request(f"{self.url}/api/v1/import/prometheus", data=text.encode(), method="POST")
        with urllib.request.urlopen(request, timeout=120):
            pass
        self.flush()

    def flush(self) -> None:
        with urllib.request.urlopen(f"{self.url}/internal/force_flush", timeout=60):
            pass

    def export(self, selector: str) -> list[dict]:
        """The raw samples of the series `selector` matches: [{"metric", "values", "timestamps"}]."""
        query = urllib.parse.urlencode({"match[]": selector})
        with urllib.request.urlopen(f"{self.url}/api/v1/export?{query}", timeout=60) as response:
            return [json.loads(line) for line in response.read().decode().splitlines() if line.strip()]


def prometheus_text(runs: list[RecordedRun], scrape_interval: float) -> str:
    """The runs' scrapes as backfill writes them for Prometheus, in the text format VictoriaMetrics
    imports (timestamps in ms). NaN samples are sent as they are; VictoriaMetrics drops them."""
    openmetrics = io.StringIO()
    write_openmetrics(runs, openmetrics, scrape_interval)
    lines = []
    for line in openmetrics.getvalue().splitlines():
        if not line.startswith("#"):
            sample, seconds = line.rsplit(" ", 1)
            lines.append(f"{sample} {round(float(seconds) * 1000)}")
    return "\n".join(lines) + "\n"


def firing_starts(server: VictoriaMetricsServer, gap_seconds: float) -> dict[str, list[float]]:
    """alertname -> when each of its firing intervals started (Unix seconds), read from the ALERTS
    series a replay wrote; samples more than `gap_seconds` apart start a new interval."""
    starts: dict[str, list[float]] = {}
    for series in server.export('ALERTS{alertstate="firing"}'):
        stamps = sorted(t / 1000 for t in series["timestamps"])
        found = starts.setdefault(series["metric"]["alertname"], [])
        found += [t for previous, t in zip([None, *stamps], stamps) if previous is None or t - previous > gap_seconds]
    return {name: sorted(times) for name, times in sorted(starts.items())}


# A recording read by a later rule of its group must be searchable before that rule runs: remote
# write flushes every REMOTE_WRITE_FLUSH, and VictoriaMetrics makes new samples searchable within
# about a second after that.
REMOTE_WRITE_FLUSH = "1s"
RULES_DELAY = "3s"


def replay(server: VictoriaMetricsServer, rule_files: list[Path], start: float, end: float,
           group_interval: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    """`vmalert` in replay mode over [start, end] (Unix seconds) against `server`, writing the
    recordings and ALERTS back to it; BuildError with vmalert's log if it fails. The rule files
    are read as they are: those rendered for VictoriaMetrics (rendered/victoriametrics/rules/)."""
    vmalert = find_binary("vmalert")
    command = [vmalert, *(f"-rule={p}" for p in rule_files),
               f"-datasource.url={server.url}", f"-remoteWrite.url={server.url}",
               f"-replay.timeFrom={_rfc3339(start)}", f"-replay.timeTo={_rfc3339(end)}",
               f"-datasource.queryStep={group_interval}", f"-replay.rulesDelay={RULES_DELAY}",
               f"-remoteWrite.flushInterval={REMOTE_WRITE_FLUSH}", "-replay.disableProgressBar",
               f"-httpListenAddr=127.0.0.1:{free_port()}", "-loggerLevel=ERROR"]
    try:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   stdin=subprocess.DEVNULL, preexec_fn=die_with_parent_hook())
    except OSError as exc:
        raise BuildError(f"cannot run vmalert ({vmalert}): {exc.strerror or exc}") from None
    try:
        output, _ = process.communicate(timeout=timeout)
    except BaseException:
        stop_process(process)
        raise
    if process.returncode != 0:
        raise BuildError(f"vmalert replay failed (status {process.returncode}):\n{output[-3000:]}")
    server.flush()
    return subprocess.CompletedProcess(command, process.returncode, output, "")


def _rfc3339(when: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))
