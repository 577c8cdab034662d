"""Windows counted in steps (`dashgen.conditions.steps`), compiled to the time the run's own rhythm gives.

This is the fallback: a series the exporter maps from the step log has its step windows computed
there, exactly (dashgen/sources/step_statistics.py). What is left compiles here: a window over a
recorded series, `for_=steps(N)` of a condition the exporter cannot judge alone
(dashgen/compiler/rules/for_steps.py), and every step window of a source without a step log
(RL-Insight).

A PromQL range is a literal duration, and runs last from 1.5 s to 20 minutes a step: a 5-minute
median is 200 steps of one run and less than one step of another. So the run's rhythm is
recorded, its seconds per training step measured from the times and step numbers of its
step-log lines (a log of every Nth step, or one without timing_s/step, is measured alike), and
banded: band k holds the rhythms from 2^k to 2^(k+1) seconds per step. A step window
compiles to one branch per band, each with the time its count of steps takes at the middle of
the band, sampled twice a step (at most MAX_SAMPLES times), and each run reads the branch of
its own band. So a window of N steps holds between
N/2^(1/2) and N*2^(1/2) of the run's steps (within 41%) from 1 s to 68 minutes a step; never
less than `step_window_floor`, since Prometheus keeps one sample per scrape whatever a step
lasts. Bands whose windows round to the same time share a branch.

Until a run has logged two lines within `rhythm_window`, it has no rhythm and no step window
reads anything for it: its rhythm is learnt from its own log first.

Slower bands have long windows (200 steps of a 20-minute step are almost three days), and a
branch that read them for every run would cost every cycle what only a few slow runs need. So a
series a step window reads is also recorded labelled with the bands near its run's rhythm
(`near_band`: its own and the two beside it, so a run that moves to the next band finds its
history there), and a branch whose subquery samples no finer than a rule evaluation selects
only its own band's copy (recorded once an evaluation, it holds the same samples): a cycle
reads those windows for their own runs alone. Finer branches read the series itself, short
ones as a plain range.
"""

from __future__ import annotations

import math
from typing import Callable

from dashgen.catalog import LAST_STEP_METRIC
from dashgen.config import duration_seconds, format_duration
from dashgen.model import ON_RUN, Recording

SECONDS_PER_STEP = "verl:run:seconds_per_step"
STEP_BAND = "verl:run:step_band"
GLOBAL_STEP = "verl_training_global_step"
# Band 0 is 1 to 2 s a step (and every faster rhythm), the last band 68 minutes and slower. Each
# band is a branch every evaluation computes, for every run: 13 keep a cycle cheap (twice as many
# bands halve the error and double the cost).
BANDS = 13
# A step window is sampled twice a step, but at most this often: every branch is evaluated for
# every run at every cycle, so this bounds the rules' cost (bench/scale_1024.py). A raw signal
# keeps its 40 samples (a median of 20 steps of a reward that jumps between 0 and its maximum
# needs them); the extremes of already smoothed medians over 200 steps are read every 17 steps.
MAX_SAMPLES = 40
MAX_SAMPLES_OF_MEDIANS = 12


def band_seconds(band: int) -> float:
    """Seconds per step at the middle of a band (geometric)."""
    return 2 ** (band + 0.5)


def band_of(seconds_per_step: float) -> int:
    """The band a rhythm falls in, as the recording computes it."""
    return min(max(math.floor(math.log2(seconds_per_step)), 0), BANDS - 1)


NEAR_BAND = "near_band"


def near_band_copy(name: str, series: str) -> Recording:
    """`series` again, once under each band near its run's rhythm, labelled `near_band`: its own
    band and the two beside it, each a label made of the band's value by count_values (1 for each
    run), which the series is multiplied by: three terms, whatever the number of bands."""
    near = (STEP_BAND, f"{STEP_BAND} - 1 >= 0", f"{STEP_BAND} + 1 <= {BANDS - 1}")
    terms = [f'{series} * on({ON_RUN}) group_left({NEAR_BAND}) count_values by ({ON_RUN}) ("{NEAR_BAND}", {band})'
             for band in near]
    return Recording(name, "\nor\n".join(terms),
                     f"{series.split('{')[0]} of the runs whose rhythm is in or beside band near_band: what the "
                     f"coarser step windows read")


def rhythm_recordings(window: str) -> tuple[Recording, Recording]:
    """The run's seconds per step (measured over `window`) and its band, recorded once per project.

    The time and steps between the newest step-log line and the one `window` ago, read as two
    instants: a range over the whole window would read every scrape of it (hours) for every run at
    every cycle. A run younger than the window is measured from a sixth of it ago, or from its
    first line within that sixth, or, slower still, within the window read every 36th of it."""
    last, step = f"{LAST_STEP_METRIC}{{verl}}", f"{GLOBAL_STEP}{{verl}}"
    seconds = duration_seconds(window)
    sixth = format_duration(max(1.0, float(math.ceil(seconds / 6))))
    coarse = f"[{window}:{format_duration(max(1.0, float(math.ceil(seconds / 36))))}]"

    def rate(earlier_time: str, earlier_step: str) -> str:
        return f"({last} - {earlier_time}) / (({step} - {earlier_step}) > 0)"

    terms = [rate(f"{last} offset {window}", f"{step} offset {window}"),
             rate(f"{last} offset {sixth}", f"{step} offset {sixth}"),
             rate(f"min_over_time({last}[{sixth}])", f"min_over_time({step}[{sixth}])"),
             rate(f"min_over_time({last}{coarse})", f"min_over_time({step}{coarse})")]
    seconds_per_step = Recording(
        SECONDS_PER_STEP, "\nor\n".join(terms),
        f"Seconds per training step of the run: the time between its newest step-log line and the one "
        f"{window} before (or its first since), over the steps between them")
    band = Recording(
        STEP_BAND, f"clamp(floor(log2({SECONDS_PER_STEP})), 0, {BANDS - 1})",
        "The run's rhythm band: k for 2^k to 2^(k+1) seconds per step; step windows read their branch of "
        "this band")
    return seconds_per_step, band


def step_window_seconds(count: int, band: int, floor: float) -> float:
    """The time a window of `count` steps compiles to for a run in `band`."""
    return max(floor, float(math.ceil(count * band_seconds(band))))


def banded(count: int, expr_of_range: Callable[[str], str], floor: str, ending: int = 0,
           max_samples: int = MAX_SAMPLES, copied: tuple[Callable[[str], str], str] | None = None,
           sampled_every: str = "15s") -> str:
    """`expr_of_range(range)` of each run, over the range its rhythm gives `count` steps: the
    range is `[window:resolution]`, followed by an offset when it ends `ending` steps ago.

    The range is a subquery (`[window:resolution]`) of two samples a step: a branch that reads
    the series itself is evaluated for every run, and a window of 60 slow steps would otherwise
    read days of 15 s scrapes for runs that are not even in its band. A window that holds no more of the series'
    own samples (one every `sampled_every`) than the subquery would read is a plain range: the
    same samples, without a subquery's evaluation at every point. `copied`: how to read the
    series' near-band copy, and how often that copy is recorded."""
    floor_seconds, every = duration_seconds(floor), duration_seconds(sampled_every)
    expr_of_copy, copy_every = copied if copied else (None, "0s")
    branches: list[list] = []  # [first band, last band, range, reads the copy]
    for band in range(BANDS):
        seconds = step_window_seconds(count, band, floor_seconds)
        resolution = max(1.0, float(math.ceil(seconds / min(2 * count, max_samples))))
        plain = seconds / every <= max_samples
        window = f"[{format_duration(seconds)}]" if plain else \
            f"[{format_duration(seconds)}:{format_duration(resolution)}]"
        if ending:
            window += f" offset {format_duration(step_window_seconds(ending, band, floor_seconds))}"
        from_copy = bool(copied) and not plain and resolution >= duration_seconds(copy_every)
        if branches and branches[-1][2] == window and not from_copy and not branches[-1][3]:
            branches[-1][1] = band
        else:
            branches.append([band, band, window, from_copy])
    parts = []
    for first, last, window, from_copy in branches:
        if first == 0 and last == BANDS - 1:
            select = STEP_BAND
        elif first == 0:
            select = f"{STEP_BAND} <= {last}"
        elif last == BANDS - 1:
            select = f"{STEP_BAND} >= {first}"
        elif first == last:
            select = f"{STEP_BAND} == {first}"
        else:
            select = f"{STEP_BAND} >= {first} <= {last}"
        read = expr_of_copy("{" + f'{NEAR_BAND}="{first}"' + "}" + window) if from_copy else expr_of_range(window)
        parts.append(f"  ({read})\n  and on({ON_RUN}) ({select})")
    union = "\nor\n".join(parts)
    if any(from_copy for *_, from_copy in branches):
        return f'label_replace(\n{union},\n"{NEAR_BAND}", "", "", "")'
    return union
