"""The exporter's link from a run to the Ray session (cluster) whose GPUs it trains on.

Ray labels every node metric with `SessionName` and names its session directory the same
(`session_2025-05-01_12-00-00_123456_4242`) under its temp dir, where the symlink
`session_latest` points at the newest one. `RaySessionLink` serves
`verl_run_ray_session_info{project, experiment, SessionName} 1`, which dashboards and the
straggler alert join per-GPU series on (dashgen/gpu.py).

The session is read at every scrape unless it is given: an exporter started before the
trainer starts Ray picks the new session up as soon as Ray has written it.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from dashgen.catalog import CATALOG
from dashgen.errors import BuildError
from dashgen.gpu import RUN_SESSION_INFO, SESSION_LABEL

LATEST = "session_latest"
_SESSION_NAME = re.compile(r"session_[A-Za-z0-9_.-]+")


def latest_session(temp_dir: Path) -> str | None:
    """The session `temp_dir/session_latest` points at, or None if there is none (yet)."""
    try:
        target = os.readlink(temp_dir / LATEST)
    except OSError:
        return None
    name = Path(target).name
    return name if _SESSION_NAME.fullmatch(name) else None


def check_session_name(name: str) -> str:
    if not _SESSION_NAME.fullmatch(name):
        raise BuildError(f"--ray-session {name!r}: expected a Ray session name as in Ray's SessionName label, "
                         f"e.g. session_2025-05-01_12-00-00_123456_4242")
    return name


class RaySessionLink:
    """A prometheus_client collector of the run's `verl_run_ray_session_info` series."""

    def __init__(self, project: str, experiment: str, session: str | None = None,
                 temp_dir: Path = Path("/tmp/ray")):
        self.labels = (project, experiment)
        self.session = session
        self.temp_dir = temp_dir

    def current_session(self) -> str | None:
        return self.session if self.session is not None else latest_session(self.temp_dir)

    def collect(self) -> Iterator[Metric]:
        session = self.current_session()
        if session is None:
            return
        family = GaugeMetricFamily(RUN_SESSION_INFO, CATALOG[RUN_SESSION_INFO].help,
                                   labels=("project", "experiment", SESSION_LABEL))
        family.add_metric((*self.labels, session), 1.0)
        yield family
