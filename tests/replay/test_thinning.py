"""Thinned series (dashgen/replay/backtest/thinning.py) give Prometheus' own engine the same result as
every sample, at every time, wherever the thinning allows it; and where a function counts samples it
is not allowed."""

import pytest

from dashgen.promtool import find_binary
from dashgen.replay.backfill import create_blocks
from dashgen.replay.backtest import serve_tsdb
from dashgen.replay.backtest.evaluation import query_range, series_key
from dashgen.replay.backtest.thinning import DENSE, LOOKBACK_MS, every_nth, widest_gaps
from dashgen.replay.openmetrics import kept

START = 1_700_000_000
SCRAPE_MS = 15_000


def test_the_widest_gap_is_the_narrowest_window_that_reads_a_series():
    gaps = widest_gaps(['max_over_time(a[2m]) > b', 'changes(a[1m]) and last_over_time(c[24h] offset 1h)',
                        'quantile_over_time(0.5, d[1h])', 'timestamp(e)', 'max_over_time((f > 1)[10m:1m])',
                        'max without(series) (g{series="x"})'])
    assert gaps == {"a": 60_000, "b": LOOKBACK_MS, "c": 86_400_000, "d": DENSE, "e": DENSE,
                    "f": LOOKBACK_MS, "g": LOOKBACK_MS}
    assert widest_gaps(['{__name__=~"a.*"}']) is None
    assert every_nth(60_000, SCRAPE_MS) == 4 and every_nth(DENSE, SCRAPE_MS) == 1 and every_nth(10_000, SCRAPE_MS) == 1


def test_a_run_keeps_its_ends_and_every_nth_sample():
    assert list(kept(1, 4)) == [0]
    assert list(kept(9, 4)) == [0, 4, 8]
    assert list(kept(10, 4)) == [0, 4, 8, 9]
    assert list(kept(3, 1)) == [0, 1, 2]


def _runs():
    """(value, scrapes) runs of one series: steps of a few minutes, a gap of 20 minutes, NaNs."""
    values = ["1", "1", "2", "NaN", "NaN", "3", None, "3", "5", "5", "0"]
    lengths = [10, 25, 3, 30, 2, 41, 80, 7, 60, 1, 33]
    return list(zip(values, lengths))


def _openmetrics(name: str, every: int) -> str:
    lines, at, pending = [], START * 1000, []

    def flush():
        if pending:
            value, stamps = pending[0][0], [stamp for _, stamp in pending]
            lines.extend(f"{name} {value} {stamps[i] / 1000:.3f}\n" for i in kept(len(stamps), every))
            pending.clear()

    for value, length in _runs():
        for _ in range(length):
            if value is None or (pending and pending[0][0] != value):
                flush()
            if value is not None:
                pending.append((value, at))
            at += SCRAPE_MS
    flush()
    return f"# TYPE {name} gauge\n" + "".join(lines)


@pytest.mark.live
def test_thinned_and_whole_series_read_the_same_everywhere(tmp_path):
    find_binary("promtool")
    exprs = ["{m}", "{m} offset 7m", "max_over_time({m}[2m])", "min_over_time({m}[5m])", "changes({m}[3m])",
             "last_over_time({m}[10m])", "present_over_time({m}[2m])", "absent_over_time({m}[4m])",
             "resets({m}[5m])", "max_over_time(({m} > 1)[6m:1m])", "changes({m}[1m])", "{m} > 1.5"]
    gaps = widest_gaps([expr.format(m="whole") for expr in exprs])
    every = every_nth(gaps["whole"], SCRAPE_MS)
    assert every == 4  # the narrowest window, 1m, over 15 s scrapes
    (tmp_path / "runs.om").write_text(_openmetrics("whole", 1) + _openmetrics("thinned", every) + "# EOF\n")
    create_blocks(tmp_path / "runs.om", tmp_path / "tsdb", 86_400)
    span = (START * 1000 - 120_000, START * 1000 + sum(length for _, length in _runs()) * SCRAPE_MS + 900_000)
    with serve_tsdb(tmp_path) as server:
        for expr in exprs:
            for step in (10_000, 60_000):
                whole = query_range(server, expr.format(m="whole"), span, step, expr)
                thinned = query_range(server, expr.format(m="thinned"), span, step, expr)
                assert whole, expr
                assert [(series_key(s["metric"]), s["values"]) for s in whole] == \
                       [(series_key(s["metric"]), s["values"]) for s in thinned], expr


@pytest.mark.live
def test_a_count_over_a_thinned_series_would_differ(tmp_path):
    """Why a series a quantile or a count reads is written whole."""
    (tmp_path / "runs.om").write_text(_openmetrics("whole", 1) + _openmetrics("thinned", 4) + "# EOF\n")
    create_blocks(tmp_path / "runs.om", tmp_path / "tsdb", 86_400)
    span = (START * 1000, START * 1000 + 3_600_000)
    with serve_tsdb(tmp_path) as server:
        whole = query_range(server, "count_over_time(whole[5m])", span, 60_000, "whole")
        thinned = query_range(server, "count_over_time(thinned[5m])", span, 60_000, "thinned")
    assert [s["values"] for s in whole] != [s["values"] for s in thinned]
    assert widest_gaps(["count_over_time(x[5m])"]) == {"x": DENSE}
