"""Error evidence is read as counts: a handful of calls can't make a strong shift."""

from __future__ import annotations

import numpy as np

from rca.evidence.nodes import F, NodeEvidence
from rca.telemetry.builder import SpanBatchBuilder
from rca.telemetry.faults import Fault
from tests.spanfactory import T0, evidence_of_last_minutes, sid, tid

WINDOW_NS = 10 * 10**9
WINDOWS = 30
FAULTY_FROM = 24


def _evidence(calls: dict[str, tuple[int, int, float]]) -> NodeEvidence:
    """Per service (calls per window before the fault, after it, error share after it), root
    spans of one operation over `WINDOWS` windows; errors are spread evenly over the faulty
    windows' calls, and one call in 400 fails before."""
    builder = SpanBatchBuilder()
    span = 1
    for service, (before, after, share) in calls.items():
        failed = 0.0
        for window in range(WINDOWS):
            faulty = window >= FAULTY_FROM
            n = after if faulty else before
            for k in range(n):
                failed += share if faulty else 1 / 400
                error = failed >= 1.0
                failed -= error
                start = T0 + window * WINDOW_NS + k * (WINDOW_NS // max(n, 1))
                builder.add(tid(span), sid(span), b"", service, "GET /", 2, start, start + 10**6, error, {}, {})
                span += 1
    return evidence_of_last_minutes(builder, T0 + WINDOWS * WINDOW_NS)


def _error_score(evidence: NodeEvidence, node: str) -> float:
    return float(evidence.score[evidence.index(node), F[Fault.ERRORS]])


def test_one_failure_in_a_few_calls_is_weak_evidence_and_a_real_burst_is_strong() -> None:
    evidence = _evidence({"quiet": (1, 1, 1 / 3), "busy": (60, 60, 0.15)})
    quiet, busy = _error_score(evidence, "quiet"), _error_score(evidence, "busy")
    # Two failures in six calls after 24 spotless ones: surprising (binomial tail ~1e-3), but
    # not the ~5-sigma shift that the Welch statistic with its variance floor alone reads.
    assert 2.0 < quiet < 3.5
    assert busy > 10.0


def test_the_count_score_grows_with_the_evidence() -> None:
    scores = [_error_score(_evidence({"svc": (n, n, 0.2)}), "svc") for n in (2, 8, 32)]
    assert scores == sorted(scores) and scores[0] < 3.5 < 8.0 < scores[-1]


def test_fewer_errors_than_before_is_no_error_evidence() -> None:
    evidence = _evidence({"svc": (40, 40, 0.0)})
    assert _error_score(evidence, "svc") < 1.0
    assert np.isfinite(evidence.score[evidence.index("svc"), F[Fault.LATENCY]])


def _client_call_evidence(callee_fails: bool) -> NodeEvidence:
    """`front` serves GET / by calling `backend` (a client span, then backend's server span), 20
    calls per window; from `FAULTY_FROM` on a quarter of the calls fail: answered with an error by
    `backend` (both spans say so), or failed by `front` itself (its client span only: a timeout, a
    cancel, a request the callee answered well)."""
    builder = SpanBatchBuilder()
    span = 1
    for window in range(WINDOWS):
        for k in range(20):
            failed = window >= FAULTY_FROM and k % 4 == 0
            start = T0 + window * WINDOW_NS + k * (WINDOW_NS // 20)
            trace, server, client, callee = tid(span), sid(span), sid(span + 1), sid(span + 2)
            ms = 10**6
            builder.add(trace, server, b"", "front", "GET /", 2, start, start + 3 * ms, False, {}, {})
            call = "GET backend"
            builder.add(trace, client, server, "front", call, 3, start + ms // 10, start + 2 * ms, failed, {}, {})
            answer = failed and callee_fails
            builder.add(trace, callee, client, "backend", "GET /item", 2, start + ms, start + 2 * ms, answer, {}, {})
            span += 3
    return evidence_of_last_minutes(builder, T0 + WINDOWS * WINDOW_NS)


def test_an_error_the_callee_answers_is_the_callees_not_its_callers_client_span() -> None:
    answered = _client_call_evidence(callee_fails=True)
    assert _error_score(answered, "backend") > 5.0
    assert _error_score(answered, "front") < 1.0  # its client span only relays the answer
    own = _client_call_evidence(callee_fails=False)
    assert _error_score(own, "front") > 5.0  # the callee answered well: the failure is the caller's
    assert _error_score(own, "backend") < 1.0
