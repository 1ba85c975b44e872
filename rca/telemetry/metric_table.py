"""The metric table: well-known metric names → the signal each measures → the fault it points to.

Data, not code: the built-in entries ship in `metric_table.toml`; the config file's `[metrics]`
section adds or overrides entries (`[[metrics.map]]`, same fields). A histogram's p95 is the
measure `{name}:p95` and reads as its metric's rule with `_p95` after the signal name.
Prometheus spells counters with `_total` where OpenTelemetry may not; either spelling matches.
Names match whatever their case (OpenTelemetry instrument names are case-insensitive, and its
SDKs lower-case them).
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from importlib import resources

from rca.telemetry.faults import Fault

P95_SUFFIX = ":p95"
_TOTAL = "_total"
DIRECTIONS = {"up": 1, "down": -1, "either": 0}
PEERS = ("also", "only")
_FIELDS = frozenset({"name", "signal", "fault", "direction", "scale", "healthy", "faulty", "share_of", "peers"})


@dataclass(frozen=True, slots=True)
class MetricRule:
    """What a metric measures: `signal` (evidence `metric.{signal}`), the `fault` it points to,
    the `direction` a fault moves it (1 up, -1 down, 0 either), a `scale` into the signal's unit
    and an optional gate between `healthy` and `faulty` levels. With `share_of`, the row reads the
    measure's share of itself plus that metric's measure on the same node (node_exporter's local
    NUMA allocations of all, say), which load moves for both alike; a rule with `measured_only`
    is such a partner that no entry maps: measured, no row of its own. With `peers`, a GPU that
    runs in lockstep with others of its engine (the GPUs one service owns) also reads the
    measure's share of itself plus its peers' mean, ungated, which their common load moves alike
    and a straggler or a slow link does not: "also" beside its level's row, "only" instead of it."""

    name: str
    signal: str
    fault: Fault
    direction: int = 1
    scale: float = 1.0
    healthy: float | None = None
    faulty: float | None = None
    share_of: str | None = None
    measured_only: bool = False
    peers: str | None = None


def _number(entry: Mapping[str, object], key: str, where: str) -> float | None:
    value = entry.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{where}: {key} must be a number, got {value!r}")
    return float(value)


def parse_rule(entry: object, where: str) -> MetricRule:
    """One table entry; raises ValueError naming `where` and the field."""
    if not isinstance(entry, Mapping):
        raise ValueError(f"{where}: an entry must be a table, got {entry!r}")
    unknown = set(entry) - _FIELDS
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    for key in ("name", "signal", "fault"):
        if not isinstance(entry.get(key), str) or not entry[key]:
            raise ValueError(f"{where}: {key} must be a non-empty string")
    name, signal, fault = str(entry["name"]), str(entry["signal"]), str(entry["fault"])
    if fault not in Fault.__members__.values():
        raise ValueError(f"{where} ({name}): fault {fault!r} is not one of {', '.join(Fault)}")
    direction = entry.get("direction", "up")
    if direction not in DIRECTIONS:
        raise ValueError(f"{where} ({name}): direction {direction!r} is not one of {', '.join(DIRECTIONS)}")
    scale = _number(entry, "scale", where)
    healthy, faulty = _number(entry, "healthy", where), _number(entry, "faulty", where)
    if (healthy is None) != (faulty is None) or (healthy is not None and healthy == faulty):
        raise ValueError(f"{where} ({name}): healthy and faulty come together and differ")
    scale = 1.0 if scale is None else scale
    share_of = entry.get("share_of")
    if share_of is not None and (not isinstance(share_of, str) or not share_of or share_of.lower() == name.lower()):
        raise ValueError(f"{where} ({name}): share_of must name another metric")
    peers = entry.get("peers")
    if peers is not None and peers not in PEERS:
        raise ValueError(f"{where} ({name}): peers {peers!r} is not one of {', '.join(PEERS)}")
    sign, among = DIRECTIONS[str(direction)], None if peers is None else str(peers)
    return MetricRule(name, signal, Fault(fault), sign, scale, healthy, faulty, share_of, peers=among)


def parse_rules(entries: object, where: str) -> tuple[MetricRule, ...]:
    """A list of entries (`[[map]]` or `[[metrics.map]]`)."""
    if not isinstance(entries, list):
        raise ValueError(f"{where}: expected a list of tables ([[metrics.map]])")
    return tuple(parse_rule(entry, f"{where}[{k}]") for k, entry in enumerate(entries))


def builtin_rules() -> tuple[MetricRule, ...]:
    """The entries that ship with rca."""
    text = resources.files("rca.telemetry").joinpath("metric_table.toml").read_text(encoding="utf-8")
    return parse_rules(tomllib.loads(text).get("map"), "rca/telemetry/metric_table.toml map")


class MetricTable:
    """Metric name (or histogram measure) → rule; later rules override earlier ones by name."""

    def __init__(self, rules: Iterable[MetricRule]) -> None:
        self._rules: dict[str, MetricRule] = {}
        for rule in rules:
            self._rules[rule.name.lower()] = rule
        for rule in list(self._rules.values()):  # partners of shares that no entry maps: measured only
            if rule.share_of is not None and self.rule(rule.share_of) is None:
                partner = MetricRule(rule.share_of, rule.signal, rule.fault, measured_only=True)
                self._rules[rule.share_of.lower()] = partner

    @classmethod
    def default(cls, extra: Sequence[MetricRule] = ()) -> MetricTable:
        """The built-in table with `extra` entries added or overriding."""
        return cls([*builtin_rules(), *extra])

    def __len__(self) -> int:
        return sum(not rule.measured_only for rule in self._rules.values())

    def names(self) -> tuple[str, ...]:
        """The metric names as the table spells them."""
        return tuple(rule.name for rule in self._rules.values())

    def rule(self, measure: str) -> MetricRule | None:
        """The rule of a measure (a metric name, or `{name}:p95`), None for unknown metrics."""
        if measure.endswith(P95_SUFFIX):
            base = self.rule(measure[: -len(P95_SUFFIX)])
            return None if base is None else replace(base, signal=f"{base.signal}_p95", healthy=None, faulty=None)
        name = measure.lower()
        found = self._rules.get(name)
        if found is None:
            found = self._rules.get(name[: -len(_TOTAL)] if name.endswith(_TOTAL) else name + _TOTAL)
        return found
