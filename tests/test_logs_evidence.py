"""Log records in the graph and as evidence: templates, joins to spans, and the `log.` rows."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from api.nodegraph import node_frame
from models.ranker import BayesianRanker
from models.training import LOOKBACK_NS, replayed
from rca.evidence.nodes import F, NodeEvidence, extract_evidence
from rca.graph import service_graph
from rca.graph.logtemplates import TemplateMiner, mask_bodies
from rca.graph.series import window_series
from rca.graph.service_graph import ServiceGraph
from rca.graph.view import Window, graph_between
from rca.incidents.topology import topology_between
from rca.telemetry.builder import SpanBatchBuilder
from rca.telemetry.faults import Fault
from rca.telemetry.logs import (
    SEVERITY_ERROR,
    SEVERITY_WARN,
    LogBatch,
    infer_severity,
    log_service,
    severity_of_body,
    structured,
)
from simulation import SimulatedCase, scenarios, simulate
from simulation.faults import FaultPlan
from tests.spanfactory import T0, sid, tid

WINDOW_NS = 10 * 10**9
WINDOWS = 30
FAULTY_FROM = 24
CALLS = 12  # per window and service


def _logs(rows: list[tuple[int, str, int, int, str]]) -> LogBatch:
    """Records given as (time ns, service, span id or 0, severity number, body)."""
    services = list(dict.fromkeys(r[1] for r in rows))
    return LogBatch(
        time_ns=np.array([r[0] for r in rows], np.int64),
        service=np.array([services.index(r[1]) for r in rows], np.int32),
        trace_id=np.array([[0, 1] if r[2] else [0, 0] for r in rows], np.uint64).reshape(-1, 2),
        span_id=np.array([r[2] for r in rows], np.uint64),
        severity=np.array([r[3] for r in rows], np.int8),
        body=tuple(r[4] for r in rows),
        strings=tuple(services),
    )


def _case(fault: str | None, logs: bool = True) -> tuple[ServiceGraph, NodeEvidence]:
    """`frontend` calls `cart` and `shipping` on every request; each service logs two lines per
    call. From `FAULTY_FROM` on, `fault` changes what `cart` logs: "return" stops writing its
    second line (an early return), "exception" writes an ERROR line with a stack trace instead,
    "caught" a WARN line naming the exception it caught (and returns a fallback)."""
    spans = SpanBatchBuilder()
    rows: list[tuple[int, str, int, int, str]] = []
    span = 1
    for window in range(WINDOWS):
        faulty = fault is not None and window >= FAULTY_FROM
        for k in range(CALLS):
            start = T0 + window * WINDOW_NS + k * (WINDOW_NS // CALLS)
            root, span = span, span + 1
            spans.add(tid(root), sid(root), b"", "frontend", "GET /cart", 2, start, start + 4 * 10**6, False, {}, {})
            rows.append((start + 1, "frontend", root, 9, f"handling request {root} from 10.0.0.{k}"))
            for callee in ("cart", "shipping"):
                child, span = span, span + 1
                spans.add(
                    tid(root), sid(child), sid(root), callee, "get", 2, start + 10**6, start + 2 * 10**6, False, {}, {}
                )
                rows.append(
                    (start + 10**6 + 1, callee, child, 9, f"{callee}: loading items for user u{k} (id={child})")
                )
                if callee == "cart" and faulty and fault == "exception":
                    trace = "java.lang.IllegalStateException: cart broken\n\tat c.Cart.load(Cart.java:57)"
                    rows.append((start + 10**6 + 2, callee, child, SEVERITY_ERROR, trace))
                elif callee == "cart" and faulty and fault == "caught":
                    caught = (
                        f"cart: no items for u{k}, using an empty cart: java.lang.IllegalStateException: cart broken"
                    )
                    rows.append((start + 10**6 + 2, callee, child, SEVERITY_WARN, caught))
                elif not (callee == "cart" and faulty and fault == "return"):
                    rows.append((start + 10**6 + 2, callee, child, 9, f"{callee}: returned {k + 3} items in {k}.5 ms"))
    graph = ServiceGraph(retention_seconds=3600.0)
    graph.add(spans.build().batch)
    if logs:
        graph.add_logs(_logs(rows))
    end = T0 + WINDOWS * WINDOW_NS
    return graph, extract_evidence(graph, start_ns=end - 300 * 10**9, end_ns=end)


def test_masking_keeps_code_locations_and_masks_what_varies() -> None:
    masked = mask_bodies(
        [
            "t.s.TravelServiceImpl#532 TraceID: ffc8ca7e4c8f06c7 route f3d4d4ef-693b-4456-8eed-59c0d717dd08",
            "user 42 from 10.0.0.1:8080 at 2023-01-29T08:42:22.383Z took 3.5 ms name='bob' ids=[1, 2, 3]",
            "two\nlines",
            "[query][Stations][stations: [shanghai, suzhou, nanjing] distances: [0, 50, 300]] [a, b c]",
        ],
        max_chars=2048,
    )
    assert masked == [
        "t.s.TravelServiceImpl#532 TraceID: <*> route <*>",
        'user <*> from <*> at <*> took <*> ms name="<*>" ids=[<*>]',
        "two lines",
        "[query][Stations][stations: [<*>] distances: [<*>]] [a, b c]",  # a list of words is a value
    ]


def test_templates_are_stable_and_bounded() -> None:
    miner = TemplateMiner(max_templates=50, cache_size=100)
    first = miner.ids([f"user {i} logged in" for i in range(10)])
    assert len(set(first.tolist())) == 1
    assert miner.text(int(first[0])) == "user <*> logged in"
    again = miner.ids(["user 99 logged in"])
    assert again.tolist() == first[:1].tolist()
    miner.ids(
        [
            f"distinct{'x' * (i % 7)} template number {i} {'y' * (i % 11)} {chr(65 + i % 26) * (i % 5 + 1)}"
            for i in range(3000)
        ]
    )
    assert len(miner) <= 50


def test_a_template_reports_an_error_where_its_bodies_did_even_once_drain_masked_it() -> None:
    miner = TemplateMiner()
    caught = miner.ids(
        [f"order {i} failed: {e}" for i, e in enumerate(("NullPointerException", "IllegalStateException"))]
    )
    swallowed = miner.ids(["ignoring error from GetQuote: currency is invalid, using default"])
    plain = miner.ids(["user 1 logged in", "cache warmed in 5 ms", "0 errors in 12 batches"])
    assert caught[0] == caught[1] and miner.text(int(caught[0])) == "order <*> failed: <*>"
    reported = miner.error_reports(np.array([caught[0], swallowed[0], *plain])).tolist()
    assert reported == [True, True, False, False, False]


def test_a_long_body_cut_anywhere_keeps_its_template() -> None:
    # A list of ids too long to keep whole: where the cut falls depends on the ids' widths, so
    # the cut bodies' last tokens differ. They are one message, and read as one template.
    rng = np.random.default_rng(3)
    tickets = [rng.integers(1, 10**width, 80) for width in (2, 5, 9, 10)]
    bodies = ["sold: " + ", ".join(f"Ticket(seatNo={n}, from=shanghai, to=nanjing)" for n in t) for t in tickets]
    miner = TemplateMiner(max_templates=50, cache_size=100, max_body_chars=2048)
    assert len({len(mask_bodies([b[:2048]], 10**6)[0].split()) for b in bodies}) > 1  # cut ends differ
    assert len(set(miner.ids(bodies).tolist())) == 1
    assert miner.cached <= 100


def test_severity_from_number_text_or_body() -> None:
    got = infer_severity(
        np.array([17, 0, 0, 0, 0]),
        ["", "warning", "", "", ""],
        ["x", "x", "Exception in thread", "all fine", "ERROR x"],
    )
    assert got.tolist() == [17, 13, 17, 9, 17]


@pytest.mark.parametrize(
    ("body", "severity"),
    [
        # the level a logger wrote in the line's head stands, an exception in a warning or not
        ("2023-01-29 08:43:04.123  WARN 1 --- [main] c.t.Pay : retried after java.io.IOException", 13),
        ("08:43:04.123 [main] INFO  c.t.Cart - loaded 3 items, 0 errors", 9),
        ("E0129 08:43:04.123456   12 controller.go:88] failed to sync pod", 17),
        ("W0129 08:43:04.123456   12 controller.go:88] retrying", 13),
        ('time="2026-01-29T08:43:04Z" level=warning msg="slow query"', 13),
        ("[error] upstream timed out", 17),
        # without one: an exception, a stack trace (one frame per record too) or an error word
        ("java.lang.NullPointerException: cart is null", 17),
        ("\tat com.shop.Cart.load(Cart.java:57)", 17),
        ("Caused by: java.io.IOException: reset", 17),
        ("\t... 42 more", 17),
        ('  File "/app/cart.py", line 12, in load', 17),
        ("request failed: connection error", 17),
        ("at the end of the day all is fine", 9),
    ],
)
def test_the_severity_a_body_shows(body: str, severity: int) -> None:
    assert severity_of_body(body) == severity


def test_a_structured_loggers_line_is_its_message_at_its_level() -> None:
    zap = '{"level":"warn","ts":1765.25,"caller":"cart/load.go:57","msg":"cache miss for key 12","error":"x"}'
    assert structured(zap) == ("cache miss for key 12", "warn")
    assert structured('{"level":50,"time":1,"msg":"db down"}') == ("db down", "ERROR")  # pino's numbers
    assert structured('{"@timestamp":"t","message":"Order 7 placed","log.level":"INFO"}') == ("Order 7 placed", "INFO")
    for other in ('{"a": 1}', "{not json", "[1, 2]", "plain text"):
        assert structured(other) == (other, "")


def test_log_service_falls_back_to_deployment_then_pod() -> None:
    assert log_service({"service.name": "cart", "k8s.pod.name": "x-7d9f8b6c5d-x2x4z"}) == "cart"
    assert log_service({"k8s.deployment.name": "cart"}) == "cart"
    assert log_service({"k8s.pod.name": "checkout-7d9f8b6c5d-x2x4z"}) == "checkout"
    assert log_service({}) == "unknown_service"


def test_records_count_per_node_at_once_and_per_operation_once_their_span_arrives() -> None:
    graph = ServiceGraph(retention_seconds=3600.0)
    graph.add_logs(_logs([(T0 + 5, "cart", 2, 9, "loaded 3 items"), (T0 + 6, "logger-only", 0, 17, "disk 91% full")]))
    series = window_series(graph, 0, T0, T0 + WINDOW_NS)
    assert series.logs.sums[:, :, 0].sum() == 2  # both records are visible before their span exists
    assert series.log_ops.keys.shape[0] == 0
    spans = SpanBatchBuilder()
    spans.add(tid(1), sid(2), b"", "cart", "get", 2, T0, T0 + 10**6, False, {}, {})
    graph.add(spans.build().batch)
    series = window_series(graph, 0, T0, T0 + WINDOW_NS)
    nodeop = int(series.log_ops.keys[0] >> 32)
    assert graph.names.nodes[int(graph.names.nodeop_node[nodeop])] == "cart"
    assert graph.names.ops[int(graph.names.nodeop_op[nodeop])] == "get"
    assert "logger-only" in graph.names.node_ids  # a service that only logs is a node
    counts = graph.counts()
    assert (counts.log_records, counts.log_templates) == (2, 2)


def test_records_whose_span_never_comes_are_looked_up_in_amortised_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Logs of sampled-out traces name spans rca never gets: they wait their time out, but a pass
    over them comes once as many again wait, not at every batch, and goes group by group."""
    monkeypatch.setattr(service_graph, "_JOIN_GROUP", 3_000)
    graph = ServiceGraph(retention_seconds=3600.0)
    looked_up: list[int] = []
    lookup = graph._index.lookup
    monkeypatch.setattr(
        graph._index, "lookup", lambda ids, newest, since: looked_up.append(ids.shape[0]) or lookup(ids, newest, since)
    )
    batches, per_batch = 200, 500
    for b in range(batches):
        rows = [(T0 + b * 10**7 + k, "cart", 10**9 + b * per_batch + k, 9, "loaded 3 items") for k in range(per_batch)]
        graph.add_logs(_logs(rows))
    assert sum(looked_up) < 3 * batches * per_batch  # each record a few times, not at every batch
    assert max(looked_up) <= 3_000 + per_batch  # never all waiting records at once
    spans = SpanBatchBuilder()  # a span that does come still finds its records
    spans.add(tid(1), sid(10**9 + 7), b"", "cart", "get", 2, T0, T0 + 10**6, False, {}, {})
    graph.add(spans.build().batch)
    assert window_series(graph, 0, T0, T0 + 3 * WINDOW_NS).log_ops.sums[:, :, 0].sum() == 1


def test_a_service_that_only_logs_is_a_node_an_alert_can_name_and_the_graph_shows() -> None:
    """An async worker with no spans: its records place an alert on it, it is ranked, and the
    live graph draws it with its record counts."""
    graph, _ = _case(None)
    rows = []
    for window in range(WINDOWS):
        for k in range(CALLS):
            t = T0 + window * WINDOW_NS + k * (WINDOW_NS // CALLS) + 3
            failing = window >= FAULTY_FROM and k % 2 == 0
            body = f"consume event {k}: NullPointerException in handler" if failing else f"consumed event {k} in 3 ms"
            rows.append((t, "audit-worker", 0, SEVERITY_ERROR if failing else 9, body))
    graph.add_logs(_logs(rows))
    end = T0 + WINDOWS * WINDOW_NS
    topology = topology_between(graph, end - 300 * 10**9, end)
    assert topology.nodes_for("audit-worker") == ("audit-worker",)
    assert "audit-worker" not in topology.traced  # no spans: never a fallback for unknown names
    top = BayesianRanker().rank(graph, alert_nodes=["audit-worker"], start_ns=end - 300 * 10**9, end_ns=end).causes[0]
    assert (top.node, top.fault) == ("audit-worker", "errors") and top.probability > 0.5
    drawn = graph_between(graph, Window(end - 300 * 10**9, end))
    assert drawn.nodes["audit-worker"]["log_errors"] > 0 and drawn.nodes["audit-worker"]["log_records"] > 0
    (row,) = [r for r in node_frame(drawn, 300.0) if r["id"] == "audit-worker"]  # what Grafana draws
    assert row["detail__log_records"] == drawn.nodes["audit-worker"]["log_records"] and row["detail__calls"] == 0


def test_an_early_return_shows_as_a_vanished_template_of_the_root() -> None:
    _, evidence = _case("return")
    i, j = evidence.index("cart"), F[Fault.CALL_STRUCTURE]
    assert evidence.signal[i][j].startswith("log.template_vanished:cart:get: cart: returned <*> items")
    assert evidence.score[i, j] > 3.0
    assert evidence.observed[i, j] == 0.0
    assert np.nan_to_num(evidence.score[evidence.index("shipping"), j]) < 1.0


def test_an_exception_shows_as_a_new_error_template_and_error_rate() -> None:
    _, evidence = _case("exception")
    i, j = evidence.index("cart"), F[Fault.ERRORS]
    assert evidence.signal[i][j].startswith("log.")
    assert evidence.score[i, j] > 3.0
    assert np.nan_to_num(evidence.score[evidence.index("shipping"), j]) < 1.0


def test_a_caught_exception_logged_as_a_warning_is_error_evidence() -> None:
    """Contract section 7: new exception templates point to `errors`, whatever their level."""
    _, evidence = _case("caught")
    i, j = evidence.index("cart"), F[Fault.ERRORS]
    assert evidence.signal[i][j].startswith("log.template_new:cart:get: cart: no items for")
    assert evidence.score[i, j] > 3.0
    assert not evidence.signal[i][F[Fault.CALL_STRUCTURE]].startswith("log.template_new")


def test_lines_a_failure_leaves_unwritten_are_its_evidence_not_a_changed_code_path() -> None:
    """A worker writes two lines per event, the second only on success; from `FAULTY_FROM` half
    its events fail with an error line in place of the second. The second line's share of the
    ordinary records falls and the first's rises, both as far as the failures explain."""
    graph, _ = _case(None)
    rows = []
    for window in range(WINDOWS):
        for k in range(3 * CALLS):
            t = T0 + window * WINDOW_NS + k * (WINDOW_NS // (3 * CALLS)) + 3
            rows.append((t, "mailer-worker", 0, 9, f"consumed message {k} from queue mail-{k % 4}"))
            if window >= FAULTY_FROM and k % 2 == 0:
                rows.append((t + 1, "mailer-worker", 0, SEVERITY_ERROR, f"failed to send mail {k}: connection reset"))
            else:
                rows.append((t + 1, "mailer-worker", 0, 9, f"mail {k} sent in {k % 9} ms"))
    graph.add_logs(_logs(rows))
    end = T0 + WINDOWS * WINDOW_NS
    evidence = extract_evidence(graph, start_ns=end - 300 * 10**9, end_ns=end)
    i = evidence.index("mailer-worker")
    assert evidence.score[i, F[Fault.ERRORS]] > 3.0
    assert np.nan_to_num(evidence.score[i, F[Fault.CALL_STRUCTURE]]) < 1.0


def test_healthy_logs_add_no_evidence() -> None:
    _, evidence = _case(None)
    for j in (F[Fault.ERRORS], F[Fault.CALL_STRUCTURE]):
        assert np.nan_to_num(evidence.score[:, j]).max() < 1.0


def test_without_logs_the_evidence_is_what_spans_alone_give() -> None:
    _, with_logs = _case("return")
    _, spans_only = _case("return", logs=False)
    assert with_logs.nodes == spans_only.nodes
    latency = F[Fault.LATENCY]
    assert np.array_equal(with_logs.score[:, latency], spans_only.score[:, latency], equal_nan=True)
    assert not any(s[F[Fault.CALL_STRUCTURE]].startswith("log.") for s in spans_only.signal)


def test_masking_keeps_one_line_per_body_when_values_end_and_start_bodies() -> None:
    # A body ending in a masked value followed by one starting with a token with a digit: the
    # list-of-parameters rule must not join them across the line break.
    masked = mask_bodies(["took 12", "vllm-engine-1 returned 3", "ok"], 2048)
    assert masked == ["took <*>", "<*> returned <*>", "ok"]


def test_calls_a_caught_exception_skips_are_the_errors_evidence(monkeypatch: pytest.MonkeyPatch) -> None:
    """rag-retriever's busiest operation catches the exception of 40 % of its requests before its
    first call, logs it and returns: its calls per request fall by as much. Counting out the
    requests that logged an error beyond their failed spans, the calls move no more: the error's
    evidence. Without the logs nothing tells the drop from a changed code path."""
    planned = scenarios.plan_fault

    def caught_before_its_calls(*args: Any, **kwargs: Any) -> FaultPlan:
        plan = planned(*args, **kwargs)
        assert plan.caught > 0  # this seed's plan catches; it is made to catch everywhere, early
        return replace(plan, magnitude=0.4, caught=1.0, call=0)

    monkeypatch.setattr(scenarios, "plan_fault", caught_before_its_calls)
    case = simulate("llm-errors", seed=4)
    column = F[Fault.CALL_STRUCTURE]

    def call_structure(c: SimulatedCase) -> tuple[float, str]:
        graph, alert_ns = replayed(c)
        evidence = extract_evidence(graph, start_ns=alert_ns - LOOKBACK_NS, end_ns=graph.newest_ns + 1)
        row = evidence.index(c.truth.node)
        return float(evidence.score[row, column]), evidence.signal[row][column]

    logged, _ = call_structure(case)
    traces_only, signal = call_structure(replace(case, logs=()))
    assert signal.startswith("calls_per_request:") and traces_only > 2.0
    assert logged < 0.5
