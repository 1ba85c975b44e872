"""Builds a `MetricBatch` point by point: what every source of data points shares (the OTLP
decoders, the Prometheus reader, the simulator, dataset loaders). Points are placed on their node
(`rca.telemetry.metrics.place`, cached per attribute set) and validated together in `build`.

Attribute mappings are read once per object (decoders hand every point of one attribute set the
same mapping, request after request): callers must not change a mapping after passing it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from rca.telemetry.metrics import (
    HOST_WIDE_PREFIX,
    PLACED_GPU,
    PLACED_HOST,
    PLACED_SERVICE,
    PLACEMENT_KEYS,
    MetricBatch,
    MetricDecodeResult,
    MetricKind,
    Placement,
    place,
)
from rca.telemetry.spans import Rejection

_BELOW_2_63 = 1 << 63
_U64 = (1 << 64) - 1
_CHECKS = (
    "no timestamp: time_unix_nano is 0",
    "time must be below 2^63 ns",
    "value is not a finite number",
)
BUCKETS_MISMATCH = "bucket_counts must have one entry more than explicit_bounds"


_CACHE_CAP = 100_000  # attribute pairs remembered before the memory starts again
Resolved = tuple[Mapping[str, str], Mapping[str, str], int, Placement]
# (resource, attributes, host-wide) by identity → the pair itself (kept alive, so that identities
# are not reused), the hash of their items and where they place a point. Shared by every builder:
# scrapes repeat their series request after request.
_RESOLVED: dict[tuple[int, int, bool], Resolved] = {}
_PLACED: dict[tuple[bool, tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]], Placement] = {}


def _resolve(metric: str, resource: Mapping[str, str], attributes: Mapping[str, str], host_wide: bool) -> Resolved:
    key = (id(resource), id(attributes), host_wide)
    found = _RESOLVED.get(key)
    if found is not None and found[0] is resource and found[1] is attributes:
        return found
    resource_items, items = tuple(sorted(resource.items())), tuple(sorted(attributes.items()))
    placing = (
        host_wide,
        tuple(item for item in resource_items if item[0] in PLACEMENT_KEYS),
        tuple(item for item in items if item[0] in PLACEMENT_KEYS),
    )
    placed = _PLACED.get(placing)
    if placed is None:
        if len(_PLACED) >= _CACHE_CAP:
            _PLACED.clear()
        placed = _PLACED[placing] = place(metric, resource, attributes)
    if len(_RESOLVED) >= _CACHE_CAP:
        _RESOLVED.clear()
    found = _RESOLVED[key] = (resource, attributes, hash((resource_items, items)), placed)
    return found


@dataclass(frozen=True, slots=True)
class _Group:
    """A metric's series on one resource, in the order a request gave them: their ids and, per
    series, the node, owner and pod it places on (names) and how (`PLACED_*`)."""

    resource: Mapping[str, str]
    attributes: tuple[Mapping[str, str], ...]  # kept alive, so that `ids` are not reused
    ids: tuple[int, ...]
    series: list[int]
    nodes: list[str]
    owners: list[str | None]
    pods: list[str | None]
    placements: list[int]


MAX_GROUPED_SERIES = 200_000  # series the groups hold in all before the memory starts again


class _Groups:
    """The groups by (metric, id(resource)), shared by every builder, bounded by the series they
    hold: a flood of distinct series costs a fresh start, not memory."""

    def __init__(self) -> None:
        self.by_key: dict[tuple[str, int], _Group] = {}
        self.held = 0

    def put(self, key: tuple[str, int], group: _Group) -> None:
        old = self.by_key.pop(key, None)
        self.held -= 0 if old is None else len(old.ids)
        if self.held + len(group.ids) > MAX_GROUPED_SERIES:
            self.by_key.clear()
            self.held = 0
        self.by_key[key] = group
        self.held += len(group.ids)


_GROUPS = _Groups()


def _placement_code(p: Placement) -> int:
    return PLACED_GPU if p.gpu else PLACED_HOST if p.host else PLACED_SERVICE


def _group(
    metric: str, resource: Mapping[str, str], attributes: Sequence[Mapping[str, str]], ids: tuple[int, ...]
) -> _Group:
    host_wide = metric.startswith(HOST_WIDE_PREFIX)
    resolved = [_resolve(metric, resource, attrs, host_wide) for attrs in attributes]
    places = [found[3] for found in resolved]
    group = _Group(
        resource,
        tuple(attributes),
        ids,
        [hash((metric, found[2])) & _U64 for found in resolved],
        [p.node for p in places],
        [p.owner for p in places],
        [p.pod for p in places],
        [_placement_code(p) for p in places],
    )
    _GROUPS.put((metric, id(resource)), group)
    return group


class MetricRows:
    """Data points gathered column by column; `build` validates them into a batch."""

    def __init__(self) -> None:
        self._time: list[int] = []
        self._start: list[int] = []
        self._series: list[int] = []
        self._name: list[int] = []
        self._node: list[int] = []
        self._owner: list[int] = []
        self._pod: list[int] = []
        self._placement: list[int] = []
        self._kind: list[int] = []
        self._value: list[float] = []
        self._count: list[float] = []
        self._bounds: list[tuple[float, ...] | None] = []
        self._buckets: list[tuple[float, ...] | None] = []
        self._strings: dict[str, int] = {}
        self._places: dict[int, tuple[Placement, int, int, int, int]] = {}  # by the cached Placement's identity
        self._rejected: Counter[str] = Counter()

    def _string(self, text: str) -> int:
        return self._strings.setdefault(text, len(self._strings))

    def _where(
        self, metric: str, resource: Mapping[str, str], attributes: Mapping[str, str]
    ) -> tuple[int, int, int, int, int]:
        """The series hash part, node, owner, pod (string indices, -1: none) and placement of a point."""
        _, _, pair, p = _resolve(metric, resource, attributes, metric.startswith(HOST_WIDE_PREFIX))
        return pair, *self._indices(p)

    def _indices(self, p: Placement) -> tuple[int, int, int, int]:
        """The node, owner and pod of a placement as string indices, and its placement code."""
        found = self._places.get(id(p))
        if found is None or found[0] is not p:
            where = _placement_code(p)
            owner = -1 if p.owner is None else self._string(p.owner)
            pod = -1 if p.pod is None else self._string(p.pod)
            found = self._places[id(p)] = (p, self._string(p.node), owner, pod, where)
        return found[1], found[2], found[3], found[4]

    def add(
        self,
        metric: str,
        kind: MetricKind,
        resource: Mapping[str, str],
        attributes: Mapping[str, str],
        time_ns: int,
        start_ns: int,
        value: float,
        count: float = 0.0,
        bounds: Sequence[float] | None = None,
        bucket_counts: Sequence[float] | None = None,
    ) -> None:
        """One data point; a histogram's `value` is its sum, with its `count` and buckets."""
        if bounds is not None and bucket_counts is not None and len(bucket_counts) != len(bounds) + 1:
            self._rejected[BUCKETS_MISMATCH] += 1
            return
        pair, node, owner, pod, placement = self._where(metric, resource, attributes)
        series = hash((metric, pair)) & _U64
        self._time.append(time_ns)
        self._start.append(start_ns)
        self._series.append(series)
        self._name.append(self._string(metric))
        self._node.append(node)
        self._owner.append(owner)
        self._pod.append(pod)
        self._placement.append(placement)
        self._kind.append(int(kind))
        self._value.append(value)
        self._count.append(count)
        has_buckets = bounds is not None and bucket_counts is not None and len(bounds) > 0
        self._bounds.append(tuple(bounds) if has_buckets and bounds is not None else None)
        self._buckets.append(tuple(bucket_counts) if has_buckets and bucket_counts is not None else None)

    def add_numbers(
        self,
        metric: str,
        kind: MetricKind,
        resource: Mapping[str, str],
        attributes: Sequence[Mapping[str, str]],
        times: Sequence[int],
        starts: Sequence[int],
        values: Sequence[float],
    ) -> None:
        """The gauge or sum points of one metric, column by column (what `add` does per point,
        for the whole metric at once: this is the decoders' hot loop). A scrape repeats a metric's
        series in the same order request after request: their ids and places are kept per
        (metric, resource, attribute mappings) and only looked up again when those change."""
        key = (metric, id(resource))
        ids = tuple(map(id, attributes))
        group = _GROUPS.by_key.get(key)
        if group is None or group.resource is not resource or group.ids != ids:
            group = _group(metric, resource, attributes, ids)
        strings, owners, pods, nodes = self._strings, [], [], []
        for owner, pod, node in zip(group.owners, group.pods, group.nodes, strict=True):  # as `_indices` interns
            owners.append(-1 if owner is None else strings.setdefault(owner, len(strings)))
            pods.append(-1 if pod is None else strings.setdefault(pod, len(strings)))
            nodes.append(strings.setdefault(node, len(strings)))
        n = len(ids)
        self._time += times
        self._start += starts
        self._series += group.series
        self._name += [self._string(metric)] * n
        self._node += nodes
        self._owner += owners
        self._pod += pods
        self._placement += group.placements
        self._kind += [int(kind)] * n
        self._value += values
        self._count += [0.0] * n
        self._bounds += [None] * n
        self._buckets += [None] * n

    def reject(self, reason: str, count: int = 1) -> None:
        """Counts points refused before they got their columns."""
        self._rejected[reason] += count

    def build(self) -> MetricDecodeResult:
        """The valid points as a `MetricBatch`; the others counted by reason."""
        time = np.asarray(self._time, np.uint64)
        value = np.asarray(self._value, np.float64)
        failed = (time == 0, time >= np.uint64(_BELOW_2_63), ~np.isfinite(value))
        rejected = self._rejected.copy()
        bad = np.zeros(time.shape[0], np.bool_)
        for reason, check in zip(_CHECKS, failed, strict=True):
            hit = check & ~bad
            if hit.any():
                rejected[reason] += int(hit.sum())
                bad |= hit
        batch = MetricBatch(
            time_ns=time.astype(np.int64),
            start_ns=np.minimum(np.asarray(self._start, np.uint64), np.uint64(_BELOW_2_63 - 1)).astype(np.int64),
            series=np.asarray(self._series, np.uint64),
            name=np.asarray(self._name, np.int32),
            node=np.asarray(self._node, np.int32),
            owner=np.asarray(self._owner, np.int32),
            pod=np.asarray(self._pod, np.int32),
            placement=np.asarray(self._placement, np.int8),
            kind=np.asarray(self._kind, np.int8),
            value=value,
            count=np.asarray(self._count, np.float64),
            bucket_bounds=tuple(self._bounds),
            bucket_counts=tuple(self._buckets),
            strings=tuple(self._strings),
        )
        if bad.any():
            batch = batch.select(~bad)
        return MetricDecodeResult(batch, tuple(Rejection(n, reason) for reason, n in rejected.items()))
