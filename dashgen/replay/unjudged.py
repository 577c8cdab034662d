"""The alerts that could not judge a run: every way each can fire reads a series the run never logged.

Such an alert is quiet on the run whatever the run did, which a backtest must not report as "did not
fire": a run without actor/entropy is not judged by the entropy alerts at all. The ways of firing come
from the compiled rules (dashgen/compiler/rules/signal_needs.py), the logged series from the run's log.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from dashgen.catalog import Catalog
from dashgen.compiler.compiled import AlertRule, RecordingRule
from dashgen.compiler.rules.signal_needs import Needs, alert_needs
from dashgen.records import record
from dashgen.sources.expected_keys import lookalike


UNJUDGED = "could not judge this run"  # how a backtest's note on such an alert begins


@record
class Unjudged:
    """An alert that could not judge a run, and the log keys it lacked: those of its least demanding way
    of firing (`any_of`: each of its ways reads one key, and the run logged none of them)."""
    alertname: str
    never_logged: tuple[str, ...]
    any_of: bool = False
    # Of the keys it never logged, those the run logs under a name the catalog does not map: key -> that name.
    logged_as: tuple[tuple[str, str], ...] = ()

    @property
    def why(self) -> str:
        keys = ", ".join(self.never_logged)
        said = f"{UNJUDGED}: it never logged {'any of ' + keys if self.any_of else keys}"
        if self.logged_as:
            said += " (it logs " + ", ".join(f"{present} for {key}" for key, present in self.logged_as) + \
                ", which dashgen does not read: `aliases:` in metrics.yaml would)"
        return said


def unjudged(needs: Mapping[str, Needs], logged: set[str] | frozenset[str], catalog: Catalog,
             unmapped: Iterable[str] = ()) -> list[Unjudged]:
    """The alerts (`needs`: each one's ways of firing, as series) none of whose ways the run's `logged`
    series satisfy, each with the keys the way that lacks the fewest misses, and for each such key a
    key of the run's `unmapped` ones (no series reads them) that looks like it."""
    unmapped = tuple(unmapped)
    out = []
    for name, ways in needs.items():
        lacking = [sorted(way - logged) for way in ways]
        if lacking and all(lacking):
            if len(lacking) > 1 and all(len(missing) == 1 for missing in lacking):
                keys = sorted({_key(missing[0], catalog) for missing in lacking})
                out.append(Unjudged(name, tuple(keys), any_of=True, logged_as=_lookalikes(keys, unmapped)))
                continue
            keys = [_key(series, catalog) for series in min(lacking, key=len)]
            out.append(Unjudged(name, tuple(keys), logged_as=_lookalikes(keys, unmapped)))
    return out


def _lookalikes(keys: Iterable[str], unmapped: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    return tuple((key, present) for key in keys if (present := lookalike(key, unmapped)) is not None)


def needs_of_rules(alerts: Iterable[AlertRule], recordings: Iterable[RecordingRule], catalog: Catalog) -> dict[str, Needs]:
    """Each compiled alert's ways of firing, as the series of the log they read."""
    return alert_needs(((rule.name, rule.condition or rule.expr) for rule in alerts),
                       ((rule.record, rule.expr) for rule in recordings), catalog)


def _key(series: str, catalog: Catalog) -> str:
    metric = catalog.get(series)
    return metric.verl_keys[0] if metric is not None and metric.verl_keys else series
