"""Builds a `MetricBatch` point by point: what every source of data points shares (the OTLP
decoders, the Prometheus reader, the simulator, dataset loaders). Points are placed on their node
(`rca.telemetry.metrics.place`, cached per attribute set) and validated together in `build`.

Attribute mappings are read once per object (decoders hand every point of one attribute set the
same mapping, request after request): callers must not change a mapping after passing it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

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


class MetricRows:
    """Data points gathered column by column; `build` validates them into a batch."""

    def __init__(self) -> None:
        self._time: list[int] = []
        self._start: list[int] = []
        self._series: list[int] = []
        self._name: list[int] = []
        self._node: list[int] = []
        self._owner: list[int] = []
        self._placement: list[int] = []
        self._kind: list[int] = []
        self._value: list[float] = []
        self._count: list[float] = []
        self._bounds: list[tuple[float, ...] | None] = []
        self._buckets: list[tuple[float, ...] | None] = []
        self._strings: dict[str, int] = {}
        self._places: dict[int, tuple[Placement, int, int, int]] = {}  # by the cached Placement's identity
        self._rejected: Counter[str] = Counter()

    def _string(self, text: str) -> int:
        return self._strings.setdefault(text, len(self._strings))

    def _where(
        self, metric: str, resource: Mapping[str, str], attributes: Mapping[str, str]
    ) -> tuple[int, int, int, int]:
        """The series hash part, node, owner (string indices, -1: none) and placement of a point."""
        _, _, pair, p = _resolve(metric, resource, attributes, metric.startswith(HOST_WIDE_PREFIX))
        return pair, *self._indices(p)

    def _indices(self, p: Placement) -> tuple[int, int, int]:
        """The node and owner of a placement as string indices, and its placement code."""
        found = self._places.get(id(p))
        if found is None or found[0] is not p:
            where = PLACED_GPU if p.gpu else PLACED_HOST if p.host else PLACED_SERVICE
            owner = -1 if p.owner is None else self._string(p.owner)
            found = self._places[id(p)] = (p, self._string(p.node), owner, where)
        return found[1], found[2], found[3]

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
        pair, node, owner, placement = self._where(metric, resource, attributes)
        series = hash((metric, pair)) & _U64
        self._time.append(time_ns)
        self._start.append(start_ns)
        self._series.append(series)
        self._name.append(self._string(metric))
        self._node.append(node)
        self._owner.append(owner)
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
        its lookups inlined: this is the decoders' hot loop)."""
        host_wide = metric.startswith(HOST_WIDE_PREFIX)
        resource_id, resolved, places = id(resource), _RESOLVED, self._places
        series, nodes, owners, placements = [], [], [], []
        for attrs in attributes:
            found = resolved.get((resource_id, id(attrs), host_wide))
            if found is None or found[0] is not resource or found[1] is not attrs:
                found = _resolve(metric, resource, attrs, host_wide)
            at = places.get(id(found[3]))
            node, owner, placement = at[1:] if at is not None and at[0] is found[3] else self._indices(found[3])
            series.append(hash((metric, found[2])) & _U64)
            nodes.append(node)
            owners.append(owner)
            placements.append(placement)
        n = len(series)
        self._time += times
        self._start += starts
        self._series += series
        self._name += [self._string(metric)] * n
        self._node += nodes
        self._owner += owners
        self._placement += placements
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
