"""Log line formats of simulated services, and their bodies rendered in bulk.

A format is text with `{slot}` placeholders. Literal slots (`op`, `svc`, `callee`, `calleeop`,
`cls`, `reason`, `status`, `line`) are fixed per log line of the code (a line is a format at one
place of one operation); the others are drawn per record (ids, hashes, counts) or read from the
record (`ms`, `msi`: milliseconds since its span started). Bodies are rendered one `%` call per
format over every record using it, not one per record.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import chain

import numpy as np
import numpy.typing as npt

DEBUG, INFO, WARN, ERROR = 5, 9, 13, 17
LITERALS = frozenset({"op", "svc", "callee", "calleeop", "cls", "reason", "status", "line"})
_SEPARATOR = "\x1f"
_SLOT = re.compile(r"\{(\w+)\}")
_WORDS = ("alice", "gold", "EUR", "USD", "fr-FR", "express", "beta", "summer-sale", "eu-west", "mobile", "guest")
# printf conversion and columns drawn per random slot
_RANDOM: dict[str, tuple[str, int]] = {
    "id": ("%d", 1),
    "n": ("%d", 1),
    "count": ("%d", 1),
    "bytes": ("%d", 1),
    "port": ("%d", 1),
    "ms": ("%.1f", 1),
    "msi": ("%d", 1),
    "hex": ("%016x", 1),
    "hex8": ("%08x", 1),
    "uuid": ("%08x-%04x-4%03x-%04x-%012x", 5),
    "ip": ("10.%d.%d.%d", 3),
    "word": ('"%s"', 1),
}


@dataclass(frozen=True, slots=True)
class Format:
    text: str
    severity: int


def _pool(severity: int, *texts: str) -> tuple[Format, ...]:
    return tuple(Format(t, severity) for t in texts)


HEALTHY = (
    *_pool(
        INFO,
        "handled {op} for user {id} in {ms} ms",
        "cache hit for key {hex}",
        "cache miss for key {hex}",
        "GET /api/v{n}/items/{id} 200",
        "received {op} request {uuid}",
        "user {id} authenticated via {word}",
        "processing {count} items for order {uuid}",
        "{op} completed status=OK elapsed={msi}ms",
        "session {hex8} refreshed for user {id}",
        "validated payload of {bytes} bytes",
        "applying pricing rule {word} to cart {hex8}",
        "request from {ip} accepted",
        "feature flag {word} evaluated to true",
        "selected replica {n} for shard {hex8}",
        "response serialized in {ms} ms ({bytes} bytes)",
    ),
    *_pool(DEBUG, "{op} params: page={n} size={count}", "lookup {hex8} resolved in {ms} ms"),
)
AFTER_CALL = _pool(
    INFO,
    "{callee} returned {count} items in {ms} ms",
    "got {calleeop} response from {callee} ({bytes} bytes)",
    "call {calleeop} ok after {msi}ms",
    "fetched {count} records via {calleeop}",
)
REQUEST_ERROR = _pool(
    ERROR,
    "request failed: {op} status=500 duration={msi}ms",
    "error handling {op}: internal error",
    "{op} returned error code {n}",
    "{op} failed after {ms} ms, request_id={uuid}",
)
CALL_FAILED = (
    *_pool(WARN, "call to {callee} failed: {status}", "{calleeop} on {callee} returned {status}, attempt {n}"),
    *_pool(ERROR, "error calling {callee}/{calleeop}: rpc error: code = {status}"),
)
EXCEPTIONS = _pool(
    ERROR,
    "{op} failed: java.lang.IllegalStateException: order {uuid} has no items",
    "Unhandled exception while processing {op}: ZeroDivisionError: division by zero",
    "io.grpc.StatusRuntimeException: INTERNAL: cannot convert {id} units, no rate for {word}",
    "database error: duplicate key value violates unique constraint {word} (id={id})",
    "panic recovered in {op}: runtime error: index out of range [{n}] with length {n}",
    "java.lang.NullPointerException: Cannot invoke {word} because the return value of {cls}.lookup() is null\n"
    "\tat com.shop.{cls}Impl.handle({cls}Impl.java:{line})\n"
    "\tat io.grpc.stub.ServerCalls$UnaryServerCallHandler$UnaryServerCallListener.onHalfClose(ServerCalls.java:182)\n"
    "\tat io.grpc.internal.ServerImpl$JumpToApplicationThread$1HalfClosed.runInContext(ServerImpl.java:355)",
    "Traceback (most recent call last):\n"
    '  File "/app/{svc}/server.py", line {line}, in dispatch\n'
    "    return handler(request)\n"
    '  File "/app/{svc}/handlers.py", line {n}, in handle\n'
    "    item = catalog[key]\n"
    "KeyError: 'sku-{id}'",
    "System.InvalidOperationException: Sequence contains no elements\n"
    "   at {cls}.Handle() in /src/{cls}.cs:line {line}\n"
    "   at Grpc.AspNetCore.Server.Internal.CallHandlers.UnaryServerCallHandler.HandleCallAsync()",
)
EARLY_RETURN = _pool(
    INFO,
    "returning early from {op}: {reason}",
    "{op}: {reason}, skipping remaining steps",
    "short-circuit in {op} for request {uuid}: {reason}",
    "nothing to do for user {id}: {reason}",
)
SKIPPED_CALL = _pool(
    INFO, "skipping call to {callee}: {reason}", "{calleeop} disabled for user {id}", "not calling {callee} ({reason})"
)
REASONS = (
    "cache entry is stale",
    "empty result set",
    "feature disabled",
    "quota check returned false",
    "item not eligible",
    "config value missing",
)
SLOW = _pool(
    WARN,
    "slow request: {op} took {msi} ms",
    "{op} exceeded its latency budget ({ms} ms)",
    "request {uuid} slow: {msi}ms",
)
NOISE = (
    *_pool(
        WARN,
        "connection pool near capacity: {n}/{count} in use",
        "GC pause of {msi} ms",
        "retrying connection to {ip}:{port}",
        "deprecated API version v{n} used by client {id}",
        "cache eviction: {count} keys evicted",
    ),
    *_pool(
        ERROR,
        "failed to refresh feature flags: timeout after {msi}ms",
        "metrics exporter: export failed, will retry in {n}s",
    ),
)
PERIODIC = _pool(
    INFO,
    "heartbeat ok, {count} open connections",
    "flushed {count} spans to exporter",
    "config reloaded (version {hex8})",
    "health check passed in {ms} ms",
)
# A handler's catch block: the exception logged (the level is the team's habit, drawn per case)
# and a fallback returned, some with the exception's class and trace, some only in words.
CAUGHT = _pool(
    WARN,
    "{op}: falling back to defaults after java.lang.IllegalStateException: {word} is not initialised",
    "failed to enrich request {uuid}, continuing without it: java.lang.NullPointerException",
    "ignoring error from {op}: {word} is invalid, using default",
    "recovered from error in {op}: KeyError: 'sku-{id}'; returning an empty result",
    "{op}: error ignored: strconv.Atoi: parsing {word}: invalid syntax",
    "could not load {word} for {op}, serving the cached copy",
    "Exception while handling {op}, using fallback\n"
    "java.lang.NumberFormatException: For input string: {word}\n"
    "\tat java.lang.Integer.parseInt(Integer.java:{line})\n"
    "\tat com.shop.{cls}Impl.handle({cls}Impl.java:{line})",
)

FORMATS = (
    *HEALTHY,
    *AFTER_CALL,
    *REQUEST_ERROR,
    *CALL_FAILED,
    *EXCEPTIONS,
    *EARLY_RETURN,
    *SKIPPED_CALL,
    *SLOW,
    *NOISE,
    *PERIODIC,
    *CAUGHT,
)


SEVERITY = np.asarray([f.severity for f in FORMATS], np.int8)


def ids(pool: tuple[Format, ...]) -> npt.NDArray[np.int64]:
    """The indices of a pool's formats in `FORMATS`."""
    start = FORMATS.index(pool[0])
    return np.arange(start, start + len(pool), dtype=np.int64)


@dataclass(frozen=True, slots=True)
class _Compiled:
    printf: str
    slots: tuple[str, ...]


def _compile(text: str) -> _Compiled:
    slots = tuple(_SLOT.findall(text))
    unknown = [s for s in slots if s not in LITERALS and s not in _RANDOM]
    if unknown:
        raise ValueError(f"unknown log format slots {unknown} in {text!r}")
    printf = _SLOT.sub(lambda m: "%s" if m[1] in LITERALS else _RANDOM[m[1]][0], text.replace("%", "%%"))
    return _Compiled(printf, slots)


# exclusive upper bounds of the integer slots (drawn from 1)
_HIGH = {"id": 10_000_000, "n": 9, "count": 500, "bytes": 1_000_000, "port": 65_535, "hex8": 1 << 32, "hex": 1 << 63}
_COMPILED = tuple(_compile(f.text) for f in FORMATS)


def _random_columns(slot: str, elapsed_ms: npt.NDArray[np.float64], rng: np.random.Generator) -> list[list[object]]:
    m = (elapsed_ms.shape[0],)
    if slot in ("ms", "msi"):
        columns = [elapsed_ms if slot == "ms" else elapsed_ms.astype(np.int64)]
    elif slot == "word":
        columns = [np.asarray(_WORDS, object)[rng.integers(0, len(_WORDS), m)]]
    elif slot == "ip":
        columns = [rng.integers(0, 256, m) for _ in range(3)]
    elif slot == "uuid":
        columns = [rng.integers(0, 1 << b, m, dtype=np.int64) for b in (32, 16, 12, 16, 48)]
    else:
        columns = [rng.integers(1, _HIGH[slot], m, dtype=np.int64)]
    return [list(c.tolist()) for c in columns]


def render(
    line_format: npt.NDArray[np.int64],
    line_literals: Mapping[str, npt.NDArray[np.object_]],
    record_line: npt.NDArray[np.int64],
    elapsed_ms: npt.NDArray[np.float64],
    rng: np.random.Generator,
) -> list[str]:
    """The body of each record: record i is written by line `record_line[i]`, whose format is
    `FORMATS[line_format[line]]` and whose literal slots hold `line_literals[slot][line]`."""
    by_format = line_format[record_line]
    order = np.argsort(by_format, kind="stable")
    cuts = np.flatnonzero(np.diff(by_format[order])) + 1
    rendered: list[str] = []
    for rows in np.split(order, cuts) if order.shape[0] else ():
        compiled = _COMPILED[int(by_format[rows[0]])]
        columns: list[list[object]] = []
        for slot in compiled.slots:
            if slot in LITERALS:
                columns.append(line_literals[slot][record_line[rows]].tolist())
            else:
                columns.extend(_random_columns(slot, elapsed_ms[rows], rng))
        m = rows.shape[0]
        if columns:
            text = (compiled.printf + _SEPARATOR) * m % tuple(chain.from_iterable(zip(*columns, strict=True)))
            rendered.extend(text.split(_SEPARATOR)[:-1])
        else:
            rendered.extend([compiled.printf % ()] * m)
    bodies = np.empty(order.shape[0], object)
    bodies[order] = rendered
    result: list[str] = bodies.tolist()
    return result
