"""Call structure is read on successful requests: a request that fails part-way and skips its
later calls is the failure's evidence, an early return that answers well is a changed code path."""

from __future__ import annotations

from rca.evidence.nodes import F, NodeEvidence
from rca.telemetry.builder import SpanBatchBuilder
from rca.telemetry.faults import Fault
from tests.spanfactory import T0, evidence_of_last_minutes, sid, tid

WINDOW_NS = 10 * 10**9
WINDOWS = 30
FAULTY_FROM = 24
MS = 10**6


def _evidence(*, fails: bool) -> NodeEvidence:
    """`front` serves GET / by calling `backend` and then `store`, 30 requests per window; from
    `FAULTY_FROM` on a third of its requests stop after `backend`, failing (`fails`: an exception
    part-way) or answering well (an early return)."""
    builder = SpanBatchBuilder()
    span = 1
    for window in range(WINDOWS):
        for k in range(30):
            stops = window >= FAULTY_FROM and k % 3 == 0
            start = T0 + window * WINDOW_NS + k * (WINDOW_NS // 30)
            trace, root = tid(span), sid(span)
            builder.add(trace, root, b"", "front", "GET /", 2, start, start + 4 * MS, stops and fails, {}, {})
            builder.add(trace, sid(span + 1), root, "backend", "GET /a", 2, start + MS, start + 2 * MS, False, {}, {})
            if not stops:
                builder.add(
                    trace, sid(span + 2), root, "store", "GET /b", 2, start + 2 * MS, start + 3 * MS, False, {}, {}
                )
            span += 3
    return evidence_of_last_minutes(builder, T0 + WINDOWS * WINDOW_NS)


def _score(evidence: NodeEvidence, fault: Fault) -> float:
    return float(evidence.score[evidence.index("front"), F[fault]])


def test_a_request_that_fails_part_way_is_error_evidence_not_a_changed_call_structure() -> None:
    failing = _evidence(fails=True)
    assert _score(failing, Fault.ERRORS) > 10.0
    assert _score(failing, Fault.CALL_STRUCTURE) < 1.0  # its successful requests call as before


def test_an_early_return_that_answers_well_changes_the_call_structure() -> None:
    returning = _evidence(fails=False)
    assert _score(returning, Fault.CALL_STRUCTURE) > 2.0  # a third of the calls to `store` gone
    assert _score(returning, Fault.ERRORS) < 1.0
