"""Benchmark: the rule cycle at 1024 GPUs and 8 runs, before and after side by side.

    .venv/bin/python bench/rule_cycle_paired.py [--before REF] [--cycles 5] [--hours 24]

The data of bench/scale_1024.py (24 h of 128 Ray nodes x 8 GPUs, 15 verl runs with the exporter's
step statistics, backfilled, the recording rules of both rule sets filled), then one Prometheus
for each rule set (the rendered/rules/ of REF, default main, and of this checkout), each on its
own hard-linked copy of the blocks and both scraping the same live endpoint, started together.
Their rule cycles are sampled at the same time (prometheus_rule_group_last_duration_seconds of
--cycles evaluations, groups sped up six-fold as in scale_1024.py), so a machine other work is
loading slows both alike: the figure to compare is the ratio, per group and in all. A group of a
longer interval than the rule interval counts for the share of cycles it is evaluated at. Then
the samples each group's rules read in one evaluation (stats=all): a cost the load does not move.
Everything lives in a temporary directory, removed at the end.
"""

from __future__ import annotations

import argparse
import math
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from pathlib import Path

from scale_1024 import (GOALS, HOURS, LIVE_GAP_SECONDS, SCRAPE_SECONDS, Variant, build_data, fill_recordings,
                        git_variant, group_intervals, per_cycle, rendered_variant, rule_cycle, rule_samples,
                        serve_live, server_config, wait_for_compaction, wait_for_live_data)

from dashgen.replay.backfill import create_blocks
from dashgen.replay.backtest import SERVER_ARGS
from dashgen.replay.prometheus_server import PrometheusServer


def paired_cycles(variants: list[Variant], workdir: Path, runs, start: float, cycles: int) -> dict[str, dict]:
    """Each variant's rule cycle by group (ms a cycle) and samples read by group, measured side by side."""
    live = serve_live(runs, start)
    try:
        with ExitStack() as stack:
            servers = {}
            for variant in variants:
                config = server_config(variant, workdir, live)
                tsdb = workdir / variant.name / "tsdb"
                subprocess.run(["cp", "-al", str(workdir / "tsdb"), str(tsdb)], check=True)
                servers[variant.name] = stack.enter_context(PrometheusServer(config, tsdb, SERVER_ARGS))
            for server in servers.values():
                wait_for_compaction(server)
                wait_for_live_data(server)
            intervals = {variant.name: group_intervals(variant.rule_files()) for variant in variants}
            with ThreadPoolExecutor(len(servers)) as pool:
                measured = dict(zip(servers, pool.map(
                    lambda name: rule_cycle(servers[name], cycles, intervals[name]), servers)))
            at = time.time()
            out = {}
            for variant in variants:
                samples, timed = rule_samples(servers[variant.name], variant.rule_files(), at, 1)
                out[variant.name] = {"cycle": per_cycle(measured[variant.name], intervals[variant.name]),
                                     "samples": samples, "costliest": timed[:8]}
            return out
    finally:
        live.shutdown()
        live.server_close()


def report(results: dict[str, dict]) -> bool:
    before, after = results["before"], results["after"]
    groups = sorted({*before["cycle"], *after["cycle"]})
    print(f"{'group':28} {'before ms':>10} {'after ms':>10} {'ratio':>7} {'before samples':>15} {'after samples':>14}")

    def line(name: str, b: float, a: float, bs: int, as_: int) -> None:
        ratio = f"{a / b:.2f}" if b and not math.isnan(a) and not math.isnan(b) else "-"
        print(f"{name:28} {b:>10.1f} {a:>10.1f} {ratio:>7} {bs:>15} {as_:>14}")

    for group in groups:
        line(group, before["cycle"].get(group, math.nan), after["cycle"].get(group, math.nan),
             before["samples"].get(group, 0), after["samples"].get(group, 0))
    total_before, total_after = sum(before["cycle"].values()), sum(after["cycle"].values())
    line("all groups", total_before, total_after, sum(before["samples"].values()), sum(after["samples"].values()))
    shared = [g for g in groups if g in before["cycle"] and g in after["cycle"] and before["cycle"][g] > 0]
    if shared:
        print(f"median of the per-group ratios (groups in both): "
              f"{statistics.median(after['cycle'][g] / before['cycle'][g] for g in shared):.2f}")
    for name in ("before", "after"):
        print(f"costliest rules, {name} (one query each): " + "; ".join(
            f"{rule} {seconds * 1000:.1f} ms" for seconds, rule in results[name]["costliest"]))
    met = total_after <= GOALS["rule_cycle_ms"]
    print(f"rule cycle goal (<= {GOALS['rule_cycle_ms']:g} ms on a quiet machine): {'met' if met else 'NOT met'} here")
    return met


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="main", help="git ref whose rendered/rules/ is 'before'")
    parser.add_argument("--cycles", type=int, default=5, help="evaluations of each group measured")
    parser.add_argument("--hours", type=int, default=HOURS, help="length of the data set (a quick look: 1)")
    args = parser.parse_args()
    import scale_1024
    scale_1024.HOURS = args.hours
    before = git_variant("before", args.before)
    if before is None:
        return 2
    variants = [before, rendered_variant("after")]
    with tempfile.TemporaryDirectory(prefix="dashgen-paired-") as tmp:
        workdir = Path(tmp)
        end = math.floor(time.time() / SCRAPE_SECONDS) * SCRAPE_SECONDS - LIVE_GAP_SECONDS
        start = end - args.hours * 3600
        began = time.monotonic()
        runs, samples = build_data(workdir, variants, end)
        create_blocks(workdir / "scraped.om", workdir / "tsdb", end - start)
        (workdir / "scraped.om").unlink()
        fill_recordings(workdir, variants, start, end)
        print(f"data: {samples / 1e6:.1f} M samples, ready in {time.monotonic() - began:.0f} s", file=sys.stderr)
        results = paired_cycles(variants, workdir, runs, start, args.cycles)
    return 0 if report(results) else 1


if __name__ == "__main__":
    sys.exit(main())
