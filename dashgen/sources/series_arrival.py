"""Which series a run stopped logging while it kept logging steps, computed from the step log.

A key an alert reads can stop arriving: renamed by a new version of the trainer (verl's
actor/entropy_loss became actor/entropy), dropped by a config change, or by async training that
logs another set of keys. Its alert then can never fire and its panel reads "No data", while
everything else looks fine. The exporter and the backfill feed every training line to a
SeriesArrival and serve what it reports as `verl_exporter_series_unlogged_steps{series}`: for each
series the run had logged on REGULAR_LINES consecutive training lines, the training lines logged
since it last arrived, once it is missing. A series logged only now and then (validation timings,
checkpoint saves) never becomes regular, so its absence between two arrivals is no news. An exporter
started at a long log's tail follows the lines it reads from there on.
"""

from __future__ import annotations

from typing import Iterable

from dashgen.catalog import Catalog

# Consecutive training lines a series must have been logged on before its absence counts.
REGULAR_LINES = 10
# The most series followed per run: a run that logs thousands of keys is not followed beyond these.
MAX_SERIES = 2_000


class SeriesArrival:
    """Fed each training line's series (the metric names it gave a value or a NaN), oldest first."""

    def __init__(self, followed: Iterable[str] | None = None):
        self.followed = None if followed is None else frozenset(followed)
        self._streak: dict[str, int] = {}  # series -> consecutive training lines it was logged on
        self._missing: dict[str, int] = {}  # regular series -> training lines since it last arrived

    def observe(self, logged: Iterable[str]) -> None:
        """One training line (a line with no training value is not one: it is not passed)."""
        present = set(logged)
        if self.followed is not None:
            present &= self.followed
        for series in present:
            self._missing.pop(series, None)
            if series in self._streak or len(self._streak) < MAX_SERIES:
                self._streak[series] = self._streak.get(series, 0) + 1
        for series in [s for s in self._streak if s not in present]:
            if self._streak[series] >= REGULAR_LINES or series in self._missing:
                self._missing[series] = self._missing.get(series, 0) + 1
                self._streak[series] = REGULAR_LINES  # it stays regular while it is missing
            else:
                del self._streak[series]  # logged now and then: not followed until it is regular

    def unlogged(self) -> dict[str, int]:
        """Each regular series missing from the newest training lines, and for how many of them."""
        return dict(self._missing)


def logged_series(catalog: Catalog) -> frozenset[str]:
    """The series followed: those the catalog maps from a step-log key."""
    return frozenset(metric.name for metric in catalog.values() if metric.verl_keys)
