"""The Nezha fault-injection traces (FSE 2023) as `SpanBatch`es and their logs as `LogBatch`es,
read in place.

`root` is always the shared datasets folder, the one holding `nezha-dev/`; see its README.
Nezha spans carry no kind, status or attributes, so batches have kind 0, no errors and no
signals. Log lines are read as a Collector's filelog receiver with a container and a regex
parser would hand them on: the container's JSON line unwrapped, the leading clock time dropped,
the level word as severity text, the rest as body, the trace and span ids from their columns.
"""

from __future__ import annotations

import csv
import gzip
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt

from rca.telemetry.logs import LogBatch, infer_severity
from rca.telemetry.spans import N_SIGNALS, SpanBatch

NEZHA = "nezha-dev"
TRAIN_TICKET = "TrainTicket"
ONLINE_BOUTIQUE = "OnlineBoutique"
COLUMNS = (
    "TraceID",
    "SpanID",
    "ParentID",
    "PodName",
    "OperationName",
    "StartTimeUnixNano",
    "EndTimeUnixNano",
    "Duration",
)
LOG_COLUMNS = ("Timestamp", "TimeUnixNano", "Node", "PodName", "Container", "TraceID", "SpanID", "Log")
_LOG_LINE = re.compile(r"^\s*\d{1,2}:\d{2}:\d{2}(?:\.\d+)?\s+(?P<level>[A-Z]+)\s+(?P<body>.*)$", re.DOTALL)
ROOT_PARENT = "root"
_MASK64 = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def default_root() -> Path:
    """The datasets folder beside the repository checkout (`../shared/datasets`)."""
    return Path(__file__).resolve().parents[2] / "shared" / "datasets"


@dataclass(frozen=True)
class NezhaCase:
    """One labelled fault: where and when it was injected, and its trace minute files."""

    case_id: str
    system: str
    inject_ns: int  # UTC, from `inject_time_utc_wallclock`
    root_cause_service: str
    root_cause_pod: str
    fault_type: str
    trace_files: tuple[Path, ...]  # the minute files present, in minute order
    day: str
    log_files: tuple[Path, ...] = ()  # the log minute files present (Train Ticket only), in minute order


def _utc_ns(wallclock: str) -> int:
    moment = datetime.strptime(wallclock, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
    return int(moment.timestamp()) * 1_000_000_000


def _case(entry: dict[str, object], base: Path) -> NezhaCase:
    files = entry["files"]
    minutes = entry["minute_files"]
    assert isinstance(files, list) and isinstance(minutes, list)
    day = Path(str(files[0])).parts[1]  # "rca_data/<day>/trace/..."
    paths = (base / day / "trace" / f"{minute}_trace.csv.gz" for minute in minutes)
    logs = (base / day / "log" / f"{minute}_log.csv.gz" for minute in minutes)
    return NezhaCase(
        case_id=str(entry["case_id"]),
        system=str(entry["system"]),
        inject_ns=_utc_ns(str(entry["inject_time_utc_wallclock"])),
        root_cause_service=str(entry["root_cause_service"]),
        root_cause_pod=str(entry["root_cause_pod"]),
        fault_type=str(entry["fault_type"]),
        trace_files=tuple(path for path in paths if path.exists()),
        day=day,
        log_files=tuple(path for path in logs if path.exists()),
    )


def load_cases(root: Path) -> tuple[NezhaCase, ...]:
    """The cases listed in `nezha-dev/cases.json`, in file order."""
    base = root / NEZHA
    entries = json.loads((base / "cases.json").read_text())
    return tuple(_case(entry, base) for entry in entries)


def service_of(pod: str) -> str:
    """A pod's service: its name without the last two `-` parts (ReplicaSet hash, suffix)."""
    return pod.rsplit("-", 2)[0]


def _read_columns(path: Path) -> list[Sequence[str]]:
    """The eight columns of a minute file, as strings. Unquoted files (all of Nezha's) are
    split in one pass; files with quoted fields go through the csv module."""
    text = gzip.decompress(path.read_bytes()).decode()
    lines = text.splitlines()
    if not lines or tuple(lines[0].split(",")) != COLUMNS:
        raise ValueError(f"{path}: not a Nezha trace file (header {lines[:1]})")
    body = lines[1:]
    if not body:
        return [() for _ in COLUMNS]
    if '"' in text:
        return list(zip(*csv.reader(body), strict=True))
    if any(line.count(",") != len(COLUMNS) - 1 for line in body):
        raise ValueError(f"{path}: a row does not have {len(COLUMNS)} fields")
    fields = ",".join(body).split(",")
    return [fields[i :: len(COLUMNS)] for i in range(len(COLUMNS))]


def _hex_ids(values: Sequence[str], digits: int, path: Path) -> npt.NDArray[np.uint64]:
    """Fixed-width hex ids as big-endian uint64 words, as `SpanBatchBuilder` reads id bytes;
    a `root` parent becomes 0."""
    if set(map(len, values)) - {digits, len(ROOT_PARENT)}:
        raise ValueError(f"{path}: an id is not {digits} hex digits")
    joined = "".join(values)
    if len(joined) != digits * len(values):  # "root" ids, which only parents may be
        joined = joined.replace(ROOT_PARENT, "0" * digits)
    raw = bytes.fromhex(joined)
    if len(raw) * 2 != digits * len(values):
        raise ValueError(f"{path}: an id is not {digits} hex digits")
    return np.frombuffer(raw, dtype=">u8").astype(np.uint64).reshape(len(values), -1)


def _intern(
    services: Sequence[str], operations: Sequence[str]
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.int32], tuple[str, ...]]:
    """String codes into one table, in first-appearance order, service before operation."""
    table: dict[str, int] = {}
    pairs = {
        pair: (table.setdefault(pair[0], len(table)), table.setdefault(pair[1], len(table)))
        for pair in dict.fromkeys(zip(services, operations, strict=True))
    }
    codes = np.array([pairs[pair] for pair in zip(services, operations, strict=True)], np.int32)
    return codes[:, 0], codes[:, 1], tuple(table)


def _check_spans(batch: SpanBatch, path: Path) -> None:
    """Refuses what `SpanBatchBuilder.add` would reject, rather than dropping it silently."""
    if not (batch.trace_id.any(axis=1).all() and batch.span_id.all()):
        raise ValueError(f"{path}: a trace or span id is zero")
    if not (batch.start_ns > 0).all():
        raise ValueError(f"{path}: a start time is missing")
    if (batch.end_ns < batch.start_ns).any():
        raise ValueError(f"{path}: a span ends before it starts")


def read_trace_csv(path: Path) -> SpanBatch:
    """One gzipped Nezha minute file as a `SpanBatch`, rows in file order."""
    trace, span, parent, pod, operation, start, end, _ = _read_columns(path)
    n = len(span)
    if n == 0:
        return SpanBatch.empty()
    pod_service = {name: service_of(name) for name in set(pod)}
    service_codes, operation_codes, strings = _intern([pod_service[name] for name in pod], operation)
    batch = SpanBatch(
        trace_id=_hex_ids(trace, 32, path),
        span_id=_hex_ids(span, 16, path).reshape(n),
        parent_id=_hex_ids(parent, 16, path).reshape(n),
        service=service_codes,
        operation=operation_codes,
        peer=np.full(n, -1, np.int32),
        resource=np.full(n, -1, np.int32),
        instance=np.full(n, -1, np.int32),
        kind=np.zeros(n, np.int8),
        start_ns=np.array(list(map(int, start)), np.int64),
        end_ns=np.array(list(map(int, end)), np.int64),
        error=np.zeros(n, np.bool_),
        signals=np.full((n, N_SIGNALS), np.nan),
        strings=strings,
    )
    _check_spans(batch, path)
    return batch


def _first_pod(path: Path) -> str:
    with gzip.open(path, "rt", newline="") as text:
        reader = csv.reader(text)
        next(reader)
        return next(reader)[COLUMNS.index("PodName")]


def system_of(path: Path) -> str:
    """Which system recorded a minute file, judged by its first span's service: Train Ticket
    services are named `ts-*`, Online Boutique ones are not (`frontend`, `cartservice`)."""
    return TRAIN_TICKET if service_of(_first_pod(path)).startswith("ts-") else ONLINE_BOUTIQUE


def normal_minutes(root: Path, system: str) -> tuple[Path, ...]:
    """The fault-free minute files of `system` under `nezha-dev/construct_data`, sorted."""
    files = sorted((root / NEZHA / "construct_data").glob("*/trace/*_trace.csv.gz"))
    return tuple(path for path in files if system_of(path) == system)


def _splitmix64(seed: int, count: int) -> list[int]:
    """The first `count` outputs of the splitmix64 generator seeded with `seed`."""
    out = []
    state = seed & _MASK64
    for _ in range(count):
        state = (state + _GOLDEN) & _MASK64
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        out.append(z ^ (z >> 31))
    return out


def _remap(ids: npt.NDArray[np.uint64], mask: int) -> npt.NDArray[np.uint64]:
    """`id ^ mask` for non-zero ids, with the one id that would become 0 sent to `mask`
    instead (still a bijection on non-zero ids); 0 stays 0."""
    word = np.uint64(mask)
    out = ids ^ word
    out[out == 0] = word
    out[ids == 0] = 0
    return out


def _remap_trace(ids: npt.NDArray[np.uint64], masks: list[int]) -> npt.NDArray[np.uint64]:
    """`_remap` on 128-bit trace ids, two words per row."""
    words = np.array(masks, np.uint64)
    out = ids ^ words
    out[~out.any(axis=1)] = words
    return out


def shift_batch(batch: SpanBatch, offset_ns: int, id_salt: int) -> SpanBatch:
    """The batch moved by `offset_ns`, with fresh ids that are a deterministic function of the
    old id and `id_salt`: the parent relation is preserved and roots keep parent 0."""
    span_mask, trace_high, trace_low = _splitmix64(id_salt, 3)
    return replace(
        batch,
        trace_id=_remap_trace(batch.trace_id, [trace_high, trace_low]),
        span_id=_remap(batch.span_id, span_mask),
        parent_id=_remap(batch.parent_id, span_mask),
        start_ns=batch.start_ns + offset_ns,
        end_ns=batch.end_ns + offset_ns,
    )


def shift_logs(batch: LogBatch, offset_ns: int, id_salt: int) -> LogBatch:
    """The log records moved and re-keyed exactly as `shift_batch` moves their spans, so that
    they still join; records without ids keep none."""
    span_mask, trace_high, trace_low = _splitmix64(id_salt, 3)
    trace = _remap_trace(batch.trace_id, [trace_high, trace_low])
    trace[~batch.trace_id.any(axis=1)] = 0
    return replace(batch, trace_id=trace, span_id=_remap(batch.span_id, span_mask), time_ns=batch.time_ns + offset_ns)


def _log_line(raw: str) -> tuple[str, str]:
    """(level, body) of a container's JSON log line."""
    try:
        line = json.loads(raw).get("log", raw)
    except (ValueError, AttributeError):
        line = raw
    line = str(line).rstrip("\n")
    match = _LOG_LINE.match(line)
    return (match["level"], match["body"]) if match else ("", line)


def _log_times(stamps: Sequence[str], nanos: Sequence[str]) -> npt.NDArray[np.int64]:
    """Each row's TimeUnixNano; where the source wrote garbage there (a negative number), its UTC
    Timestamp column instead (ISO 8601, milliseconds)."""
    times = np.array(list(map(int, nanos)), np.int64)
    for i in np.flatnonzero(times <= 0).tolist():
        moment = datetime.fromisoformat(stamps[i].removesuffix("Z")).replace(tzinfo=UTC)
        times[i] = int(moment.timestamp() * 1_000_000) * 1000
    return times


def read_log_csv(path: Path) -> LogBatch:
    """One gzipped Nezha log minute file as a `LogBatch`, rows in file order."""
    with gzip.open(path, "rt", newline="") as text:
        reader = csv.reader(text)
        header = next(reader, None)
        if header is None or tuple(header) != LOG_COLUMNS:
            raise ValueError(f"{path}: not a Nezha log file (header {header})")
        rows = list(reader)
    if not rows:
        return LogBatch.empty()
    if any(len(row) < len(LOG_COLUMNS) for row in rows):
        raise ValueError(f"{path}: a row has fewer than {len(LOG_COLUMNS)} fields")
    # A few source rows carry a second, interleaved write after the log line: its first fields stand.
    stamp, time_ns, _, pod, _, trace, span, raw = zip(*(row[: len(LOG_COLUMNS)] for row in rows), strict=True)
    services: dict[str, int] = {}
    pod_code = {name: services.setdefault(service_of(name), len(services)) for name in dict.fromkeys(pod)}
    levels, bodies = zip(*map(_log_line, raw), strict=True)
    n = len(rows)
    return LogBatch(
        time_ns=_log_times(stamp, time_ns),
        service=np.array([pod_code[name] for name in pod], np.int32),
        trace_id=_hex_ids([t or "0" * 32 for t in trace], 32, path),
        span_id=_hex_ids([t or "0" * 16 for t in span], 16, path).reshape(n),
        severity=infer_severity(np.zeros(n, np.int64), levels, bodies),
        body=tuple(bodies),
        strings=tuple(services),
    )


def _log_file(trace_file: Path) -> Path:
    """The log minute file beside a trace minute file."""
    return trace_file.parent.parent / "log" / trace_file.name.replace("_trace.csv.gz", "_log.csv.gz")


def _without_repeats(batches: list[SpanBatch]) -> list[SpanBatch]:
    """Each batch less the spans an earlier one already holds: consecutive Nezha minute files
    overlap by about a second and repeat those rows verbatim."""
    seen = np.zeros(0, np.uint64)
    out = []
    for batch in batches:
        out.append(batch.select(~np.isin(batch.span_id, seen)))
        seen = np.concatenate([seen, batch.span_id])
    return out


@dataclass(frozen=True, slots=True)
class CaseTelemetry:
    """A case's spans and log records, baseline replays first, on one clock and one id space."""

    spans: list[SpanBatch]
    logs: list[LogBatch]


def case_batches(case: NezhaCase, root: Path, baseline_minutes: int) -> list[SpanBatch]:
    """The spans of `case_telemetry`."""
    return case_telemetry(case, root, baseline_minutes, logs=False).spans


def case_telemetry(case: NezhaCase, root: Path, baseline_minutes: int, *, logs: bool = True) -> CaseTelemetry:
    """`baseline_minutes` replays of the system's normal minute files (cycled, fresh ids per
    copy), packed back to back to end just before the case's first span, then the case's own
    minute files without the spans repeated between neighbouring files. With `logs`, each
    replayed minute's log records are shifted and re-keyed like its spans, and the case's own
    log minute files follow (rows repeated between files dropped). Raises ValueError if a
    baseline is asked for but none exists."""
    minutes = _without_repeats([read_trace_csv(path) for path in case.trace_files])
    normal_files = normal_minutes(root, case.system)
    normals = [read_trace_csv(path) for path in normal_files]
    if baseline_minutes > 0 and not normals:
        raise ValueError(f"no normal minutes for {case.system} under {root}")
    cursor = min(int(batch.start_ns.min()) for batch in minutes if len(batch))
    baseline, baseline_logs = [], []
    for copy in reversed(range(baseline_minutes)):
        normal = normals[copy % len(normals)]
        offset = cursor - 1 - int(normal.end_ns.max())
        shifted = shift_batch(normal, offset, copy + 1)
        cursor = int(shifted.start_ns.min())
        baseline.append(shifted)
        log_file = _log_file(normal_files[copy % len(normals)])
        if logs and log_file.exists():
            baseline_logs.append(shift_logs(read_log_csv(log_file), offset, copy + 1))
    own_logs = _logs_without_repeats([read_log_csv(path) for path in case.log_files]) if logs else []
    return CaseTelemetry([*reversed(baseline), *minutes], [*reversed(baseline_logs), *own_logs])


def _logs_without_repeats(batches: list[LogBatch]) -> list[LogBatch]:
    """Each batch less the records an earlier one already holds (same time, span and body)."""
    seen: set[tuple[int, int, str]] = set()
    out = []
    for batch in batches:
        keys = list(zip(batch.time_ns.tolist(), batch.span_id.tolist(), batch.body, strict=True))
        out.append(batch.select(np.array([key not in seen for key in keys], np.bool_)))
        seen.update(keys)
    return out
