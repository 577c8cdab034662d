"""The query-only Prometheus a backtest (and a preview) reads its TSDB with, and the threads that query it."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from dashgen.replay.backtest.blocks import parallel_jobs
from dashgen.replay.prometheus_server import PrometheusServer

# Backfilled runs may be years old; the default 15 d retention would delete them at start-up.
SERVER_ARGS = ("--storage.tsdb.retention.time=100y", "--log.level=warn")
# The query-only server's garbage collection: a quarter as often as Go's default (100) takes a
# quarter less CPU over a backtest's queries, for twice the memory (130 MB on a 10,000-step run).
# $GOGC, if set, wins.
QUERY_SERVER_GOGC = "400"


@contextmanager
def serve_tsdb(workdir: Path, extra_args: tuple[str, ...] = ()) -> Iterator[PrometheusServer]:
    """A Prometheus over workdir/tsdb that scrapes nothing and evaluates no rule: queries only."""
    config_file = workdir / "prometheus.yml"
    if not config_file.exists():
        config_file.write_text("# dashgen backtest: no scrapes, no rules; queries only.\nglobal: {}\n")
    server = PrometheusServer(config_file, workdir / "tsdb", (*SERVER_ARGS, *extra_args))
    server.env = {**os.environ, "GOGC": os.environ.get("GOGC", QUERY_SERVER_GOGC)}
    with server:
        yield server


@contextmanager
def query_pool() -> Iterator[ThreadPoolExecutor]:
    """Threads for queries, one per processor (each Prometheus query uses one core); the `with`
    block ends when all are answered, or on an error once those running are."""
    pool = ThreadPoolExecutor(parallel_jobs(), thread_name_prefix="dashgen-query")
    try:
        yield pool
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)  # every query submitted has its answer
