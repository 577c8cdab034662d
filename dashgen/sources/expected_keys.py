"""Which keys of its framework's a run never logged (dashgen/framework_keys.py says which are expected).

A run can lack a key from its first step: a trainer version that names it otherwise, a config that
turns it off, a logger that drops it. VerlSignalStopped (series_arrival.py) never sees it, since it
follows only keys that once arrived; the alerts that read the key are blind from the start. The
exporter and the backfill feed every training line's keys to a NeverLogged and serve what it reports
as `verl_exporter_series_never_logged_steps{series}`: once the run is recognised as a framework's,
for each key that framework is expected to log and the run has not logged on any training line, the
training lines the run has logged so far, and under `logged_as` a key the run does log that the
catalog does not map and that looks like the missing one (an older or newer name: `timing/gen` for
`timing_s/gen`). VerlSignalNeverLogged (alerts/signals.py) tells it, as an info, once that count
reaches its tunable. An exporter started at a long log's tail follows the lines
it reads from there on: a key logged only before the tail counts as never logged.
"""

from __future__ import annotations

import difflib
from typing import Iterable

from dashgen.catalog import Catalog
from dashgen.framework_keys import FRAMEWORKS, FrameworkKeys

# Keys of a run's log that no catalog series reads and that are not the name of a series it misses:
# validation results (their own families) and step counters.
_NOT_SIGNALS = ("val/", "val-core/", "val-aux/", "step", "global_step", "_step", "timestamp")
# At most this many unmapped keys are remembered per run (a log with a key per sample or per token).
MAX_UNMAPPED_KEYS = 2_000
# How alike two keys' spellings must be (difflib's ratio) to name one as the other's other name.
CLOSE_SPELLING = 0.78


def lookalike(key: str, unmapped: Iterable[str]) -> str | None:
    """The key among `unmapped` (a run's keys the catalog does not map) most like `key`, which the run
    does not log: the same name under another first part (`timing/gen` for `timing_s/gen`), else the
    closest spelling (`actor/policy_loss` for `actor/pg_loss`); None when none is alike."""
    rest = key.partition("/")[2]
    candidates = sorted(set(unmapped))
    renamed = [each for each in candidates if rest and each.partition("/")[2] == rest and each != key]
    if renamed:
        return max(renamed, key=lambda each: difflib.SequenceMatcher(None, key, each).ratio())
    close = difflib.get_close_matches(key, candidates, n=1, cutoff=CLOSE_SPELLING)
    return close[0] if close else None


class NeverLogged:
    """Fed each training line's logged keys (values or NaNs), oldest first."""

    def __init__(self, catalog: Catalog, frameworks: Iterable[FrameworkKeys] = FRAMEWORKS):
        self.frameworks = tuple(frameworks)
        key_map = catalog.verl_key_map()
        self._series_of_key = {key: metric.name for key, metric in key_map.items()}
        # Only the keys that can decide anything are kept of what a run logs.
        self._watched = {key for fw in self.frameworks for key in fw.recognised_by}
        self._prefixes = tuple(sorted({p for fw in self.frameworks for e in fw.expected for p in e.when}))
        self._seen: set[str] = set()  # watched keys and feature prefixes logged so far
        self._logged: set[str] = set()  # catalog series logged so far
        self.unmapped: set[str] = set()  # keys logged that no catalog series reads (up to MAX_UNMAPPED_KEYS)
        self._expected_key = {key_map[e.key].name: e.key for fw in self.frameworks for e in fw.expected}
        self.framework: FrameworkKeys | None = None
        self.lines = 0

    def observe(self, keys: Iterable[str]) -> None:
        """One training line's keys (a line with no training value is not one: it is not passed)."""
        self.lines += 1
        for key in keys:
            series = self._series_of_key.get(key)
            if series is not None:
                self._logged.add(series)
            elif (isinstance(key, str) and len(self.unmapped) < MAX_UNMAPPED_KEYS
                  and not key.startswith(_NOT_SIGNALS)):
                self.unmapped.add(key)
            if key in self._watched:
                self._seen.add(key)
            for prefix in self._prefixes:
                if key.startswith(prefix):
                    self._seen.add(prefix)
        if self.framework is None:
            self.framework = next((fw for fw in self.frameworks if fw.recognised_by <= self._seen), None)

    def missing(self) -> dict[str, int]:
        """Each expected series the run has not logged yet, with the training lines it has logged."""
        if self.framework is None:
            return {}
        return {series: self.lines for series in self.expected_series(self.framework)
                if series not in self._logged}

    def labelled(self) -> dict[tuple[str, str], int]:
        """missing() keyed by (series, logged_as): the key the run logs that looks like the series' own
        ("" when none does)."""
        return {(series, lookalike(self._expected_key[series], self.unmapped) or ""): lines
                for series, lines in self.missing().items()}

    def expected_series(self, framework: FrameworkKeys) -> list[str]:
        """The series of `framework`'s keys expected of this run so far (their features on)."""
        return [self._series_of_key[e.key] for e in framework.expected
                if not e.when or any(p in self._seen for p in e.when)]
