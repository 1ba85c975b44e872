"""Packed int64 keys of the graph's tables, built and taken apart in one place.

Every keyed table (`rca.graph.accumulators.KeyedTable`) is keyed by one int64 made of two ids:

- pair keys, 32 + 32 bits: node-operations (node, operation), edges (caller node-operation,
  callee node-operation), log templates (node or node-operation, template);
- signal keys, node << 8 | `rca.telemetry.spans.Signal`;
- measure keys, node << 16 | metric measure (`rca.graph.metric_measures`).

Builders check that each part fits its bits (ids are dense counters, so they stay far below, but
a silent overlap would merge unrelated rows) and raise `OverflowError` otherwise.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]
PAIR_BITS = 32
SIGNAL_BITS = 8
MEASURE_BITS = 16
_PAIR_MASK = (1 << PAIR_BITS) - 1
_SIGNAL_MASK = (1 << SIGNAL_BITS) - 1
_MEASURE_MASK = (1 << MEASURE_BITS) - 1
_HIGH_LIMIT = 1 << 31  # the high part keeps int64 keys non-negative


def _check(part: Ints | int, limit: int, what: str) -> None:
    array = np.asarray(part)
    if array.size and (int(array.max()) >= limit or int(array.min()) < 0):
        raise OverflowError(f"{what} ids must lie in [0, {limit}): got {int(array.min())}..{int(array.max())}")


def pair_key(high: Ints, low: Ints) -> Ints:
    """high << 32 | low: a node-operation, an edge or a log template key."""
    _check(high, _HIGH_LIMIT, "high")
    _check(low, 1 << PAIR_BITS, "low")
    key: Ints = (np.asarray(high, np.int64) << PAIR_BITS) | np.asarray(low, np.int64)
    return key


def high(keys: Ints) -> Ints:
    """The first part of pair keys: a node-operation's node, an edge's caller, a template's group."""
    part: Ints = keys >> PAIR_BITS
    return part


def low(keys: Ints) -> Ints:
    """The second part of pair keys: a node-operation's operation, an edge's callee, a template."""
    part: Ints = keys & _PAIR_MASK
    return part


def signal_key(node: Ints, signal: Ints | int) -> Ints:
    """node << 8 | signal: a span signal observed on a node."""
    _check(node, 1 << (63 - SIGNAL_BITS), "node")
    _check(signal, 1 << SIGNAL_BITS, "signal")
    key: Ints = (np.asarray(node, np.int64) << SIGNAL_BITS) | np.asarray(signal, np.int64)
    return key


def signal_node(keys: Ints) -> Ints:
    part: Ints = keys >> SIGNAL_BITS
    return part


def signal_of(keys: Ints) -> Ints:
    part: Ints = keys & _SIGNAL_MASK
    return part


def measure_key(node: Ints, measure: Ints) -> Ints:
    """node << 16 | measure: a metric measure observed on a node."""
    _check(node, 1 << (63 - MEASURE_BITS), "node")
    _check(measure, 1 << MEASURE_BITS, "measure")
    key: Ints = (np.asarray(node, np.int64) << MEASURE_BITS) | np.asarray(measure, np.int64)
    return key


def measure_node(keys: Ints) -> Ints:
    part: Ints = keys >> MEASURE_BITS
    return part


def measure_of(keys: Ints) -> Ints:
    part: Ints = keys & _MEASURE_MASK
    return part
