"""The Nezha reader: cases, minute files, id remapping and baselines, on the shared data."""

from __future__ import annotations

import gzip
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from benchmarks.nezha import (
    COLUMNS,
    ONLINE_BOUTIQUE,
    TRAIN_TICKET,
    NezhaCase,
    case_batches,
    default_root,
    load_cases,
    normal_minutes,
    read_trace_csv,
    service_of,
    shift_batch,
)
from rca.telemetry.builder import SpanBatchBuilder
from rca.telemetry.spans import SpanBatch

ROOT = default_root()
pytestmark = pytest.mark.skipif(
    not (ROOT / "nezha-dev" / "cases.json").exists(),
    reason=f"Nezha dataset absent: expected {ROOT / 'nezha-dev'} (see shared/datasets/README.md)",
)


@pytest.fixture(scope="module")
def cases() -> dict[str, NezhaCase]:
    return {case.case_id: case for case in load_cases(ROOT)}


def _edges(batch: SpanBatch) -> set[tuple[int, int, int, int]]:
    """(trace high, trace low, parent, child) for every non-root span."""
    rows = np.flatnonzero(batch.parent_id)
    return {
        (
            int(batch.trace_id[r, 0]),
            int(batch.trace_id[r, 1]),
            int(batch.parent_id[r]),
            int(batch.span_id[r]),
        )
        for r in rows
    }


def test_all_cases_load_with_their_minute_files(cases: dict[str, NezhaCase]) -> None:
    assert len(cases) == 10
    systems = [case.system for case in cases.values()]
    assert systems.count(TRAIN_TICKET) == 8 and systems.count(ONLINE_BOUTIQUE) == 2
    for case in cases.values():
        assert len(case.trace_files) == 3, case.case_id
        assert all(path.parent.parent.name == case.day for path in case.trace_files)
        assert case.root_cause_pod.startswith(case.root_cause_service + "-")


def test_inject_time_is_utc_wallclock(cases: dict[str, NezhaCase]) -> None:
    # 2023-01-29 08:43:04 UTC = 19386 days * 86400 + 8 h 43 min 4 s after the epoch.
    assert cases["nezha_TT_2023-01-29_0843"].inject_ns == (19386 * 86400 + 31384) * 10**9
    # The first minute file of each case holds the spans of the minute before the fault.
    for case in cases.values():
        first = read_trace_csv(case.trace_files[0])
        assert first.start_ns.min() < case.inject_ns < first.start_ns.max() + 90 * 10**9


def test_minute_file_rows_services_and_ids() -> None:
    path = ROOT / "nezha-dev" / "2023-01-29" / "trace" / "08_43_trace.csv.gz"
    batch = read_trace_csv(path)
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    assert len(batch) == len(lines) - 1 == 4445
    services = {batch.strings[i] for i in np.unique(batch.service)}
    assert "ts-gateway-service" in services and "ts-contacts-service" in services
    assert all(s.startswith("ts-") and not s[-1].isdigit() for s in services)
    first = dict(zip(COLUMNS, lines[1].split(","), strict=True))
    assert batch.span_id[0] == int(first["SpanID"], 16)
    assert (int(batch.trace_id[0, 0]) << 64) | int(batch.trace_id[0, 1]) == int(first["TraceID"], 16)
    assert batch.start_ns[0] == int(first["StartTimeUnixNano"])
    assert (batch.parent_id == 0).sum() == sum(1 for line in lines if ",root," in line)
    assert batch.kind.max() == 0 and not batch.error.any() and np.isnan(batch.signals).all()


def test_reader_matches_span_batch_builder() -> None:
    path = ROOT / "nezha-dev" / "2023-01-30" / "trace" / "13_15_trace.csv.gz"
    builder = SpanBatchBuilder()
    for line in gzip.decompress(path.read_bytes()).decode().splitlines()[1:]:
        trace, span, parent, pod, name, start, end, _ = line.split(",")
        parent_bytes = b"" if parent == "root" else bytes.fromhex(parent)
        builder.add(
            bytes.fromhex(trace),
            bytes.fromhex(span),
            parent_bytes,
            service_of(pod),
            name,
            0,
            int(start),
            int(end),
            False,
            {},
            {},
        )
    expected, actual = builder.build().batch, read_trace_csv(path)
    for field in ("service", "operation"):  # the same names; table order is not semantic
        names = [[b.strings[i] for i in getattr(b, field)] for b in (actual, expected)]
        assert names[0] == names[1], field
    for field in (
        "trace_id",
        "span_id",
        "parent_id",
        "peer",
        "resource",
        "kind",
        "start_ns",
        "end_ns",
        "error",
        "signals",
    ):
        a, e = getattr(actual, field), getattr(expected, field)
        assert a.dtype == e.dtype and np.array_equal(a, e, equal_nan=True), field


def test_quoted_fields_are_read(tmp_path: Path) -> None:
    path = tmp_path / "00_00_trace.csv.gz"
    row = f'{"ab" * 16},{"01" * 8},root,web-abc12-xyz9,"GET /a,b",5,9,0'
    path.write_bytes(gzip.compress(f"{','.join(COLUMNS)}\n{row}\n".encode()))
    batch = read_trace_csv(path)
    assert batch.strings == ("web", "GET /a,b") and batch.parent_id.tolist() == [0]


def test_bad_id_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "00_00_trace.csv.gz"
    row = f"{'ab' * 16},0123,root,web-abc12-xyz9,GET,5,9,0"
    path.write_bytes(gzip.compress(f"{','.join(COLUMNS)}\n{row}\n".encode()))
    with pytest.raises(ValueError, match="hex digits"):
        read_trace_csv(path)


def test_parents_resolve_within_the_file(cases: dict[str, NezhaCase]) -> None:
    for path in cases["nezha_TT_2023-01-29_1119"].trace_files:
        batch = read_trace_csv(path)
        known = {(int(t[0]), int(t[1]), int(s)) for t, s in zip(batch.trace_id, batch.span_id, strict=True)}
        edges = _edges(batch)
        present = sum((th, tl, parent) in known for th, tl, parent, _ in edges)
        assert present / len(edges) > 0.95, path


def test_normal_minutes_belong_to_their_system() -> None:
    tt, ob = normal_minutes(ROOT, TRAIN_TICKET), normal_minutes(ROOT, ONLINE_BOUTIQUE)
    assert len(tt) == 2 and len(ob) == 1 and not set(tt) & set(ob)
    ob_services = {s for s in read_trace_csv(ob[0]).strings if "Service/" not in s}
    assert "frontend" in ob_services and not any(s.startswith("ts-") for s in ob_services)
    assert "ts-gateway-service" in read_trace_csv(tt[0]).strings


def test_shift_batch_keeps_the_tree_and_changes_every_id() -> None:
    batch = read_trace_csv(normal_minutes(ROOT, TRAIN_TICKET)[0])
    shifted = shift_batch(batch, -3_600 * 10**9, id_salt=7)
    assert np.array_equal(shifted.start_ns, batch.start_ns - 3_600 * 10**9)
    assert np.array_equal(shifted.duration_ns, batch.duration_ns)
    assert not np.isin(shifted.span_id, batch.span_id).any()
    assert (shifted.trace_id != batch.trace_id).any(axis=1).all()
    assert np.array_equal(shifted.parent_id == 0, batch.parent_id == 0)
    assert shifted.span_id.all() and len(np.unique(shifted.span_id)) == len(batch)
    # The old → new id maps are functions, so each old edge becomes exactly one new edge.
    new_span = dict(zip(batch.span_id.tolist(), shifted.span_id.tolist(), strict=True))
    rows = np.flatnonzero(batch.parent_id)
    parent_rows = [r for r in rows if int(batch.parent_id[r]) in new_span]
    assert len(parent_rows) > 0.95 * len(rows)
    assert all(new_span[int(batch.parent_id[r])] == int(shifted.parent_id[r]) for r in parent_rows)
    again = shift_batch(batch, 0, id_salt=7)
    other = shift_batch(batch, 0, id_salt=8)
    assert np.array_equal(again.span_id, shifted.span_id)
    assert not np.isin(other.span_id, shifted.span_id).any()


def test_shift_batch_never_makes_a_zero_id() -> None:
    batch = read_trace_csv(normal_minutes(ROOT, TRAIN_TICKET)[0])
    probe = shift_batch(batch, 0, id_salt=3)
    # The span whose id equals the salt's mask would map to 0; give one span exactly that id.
    mask = int(probe.span_id[0]) ^ int(batch.span_id[0])
    span_id = batch.span_id.copy()
    span_id[1] = mask
    collided = shift_batch(replace(batch, span_id=span_id), 0, id_salt=3)
    assert collided.span_id.all() and len(np.unique(collided.span_id)) == len(batch)


def test_case_batches_put_the_baseline_first(cases: dict[str, NezhaCase]) -> None:
    case = cases["nezha_OB_2022-08-22_0402"]
    batches = case_batches(case, ROOT, baseline_minutes=2)
    assert len(batches) == 5
    baseline, minutes = batches[:2], batches[2:]
    case_start = min(int(b.start_ns.min()) for b in minutes)
    assert int(baseline[1].end_ns.max()) < case_start
    assert case_start - int(baseline[1].end_ns.max()) < 10**6
    assert int(baseline[0].end_ns.max()) < int(baseline[1].start_ns.min())
    # Two copies of the one OB normal minute, with distinct ids from each other and the case.
    assert len(baseline[0]) == len(baseline[1])
    ids = np.concatenate([b.span_id for b in batches])
    assert len(np.unique(ids)) == len(ids)
    # Neighbouring minute files repeat the spans of their overlap; each is kept once.
    raw = [read_trace_csv(p) for p in case.trace_files]
    assert len(minutes[0]) == len(raw[0])
    assert sum(map(len, minutes)) == len(np.unique(np.concatenate([b.span_id for b in raw])))
    assert sum(map(len, minutes)) < sum(map(len, raw))
