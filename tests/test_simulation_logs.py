"""The simulator's log records: joined to the spans that wrote them, deterministic per seed, and a
fault's own evidence (contract section 7): new error templates for `errors`, a code path's lines
vanishing for `call_structure`, none of that for latency."""

from __future__ import annotations

import collections
from dataclasses import dataclass
from functools import cache

import numpy as np
import pytest

from rca.graph.accumulators import LogSum
from rca.graph.logtemplates import mask_bodies
from rca.graph.series import window_series
from rca.graph.service_graph import ServiceGraph
from rca.telemetry.logs import SEVERITY_ERROR, SEVERITY_WARN, LogBatch, concat_logs, reports_error
from rca.telemetry.spans import KIND_SERVER, SpanBatch
from simulation import SCENARIOS, SimulatedCase, simulate
from simulation.scenarios import compiled
from tests.test_simulation import spans


@cache
def case(scenario: str, seed: int = 1, rate: float | None = None) -> SimulatedCase:
    return simulate(scenario, seed=seed, rate=rate)


@dataclass(frozen=True)
class Phase:
    """One service's records and SERVER spans in a time range."""

    templates: collections.Counter[str]
    errors: frozenset[str]  # templates written at ERROR severity or above, or reporting an error
    records: int
    spans: int


def records(c: SimulatedCase) -> tuple[LogBatch, np.ndarray, np.ndarray]:
    """Every record, its template and its service name."""
    logs = concat_logs(list(c.logs))
    return logs, np.asarray(mask_bodies(logs.body, 4000), object), np.asarray(logs.strings, object)[logs.service]


def phase(c: SimulatedCase, service: str, lo: int, hi: int) -> Phase:
    logs, templates, names = records(c)
    mine = (names == service) & (logs.time_ns >= lo) & (logs.time_ns < hi)
    reported = np.array([reports_error(t) for t in templates], np.bool_)
    errors = frozenset(templates[mine & ((logs.severity >= SEVERITY_ERROR) | reported)].tolist())
    s = spans(c)
    server = (np.asarray(s.strings, object)[s.service] == service) & (s.kind == KIND_SERVER)
    count = int((server & (s.start_ns >= lo) & (s.start_ns < hi)).sum())
    return Phase(collections.Counter(templates[mine].tolist()), errors, int(mine.sum()), count)


def strong_seeds(scenario: str, at_least: float, count: int) -> list[int]:
    """The first `count` seeds whose fault is at least `at_least` strong (sizes are drawn per seed)."""
    found = (s for s in range(1, 300) if simulate(scenario, seed=s, rate=0.05).truth.roots[0].magnitude >= at_least)
    return [next(found) for _ in range(count)]


def before_during(c: SimulatedCase, service: str) -> tuple[Phase, Phase]:
    t = c.truth
    return phase(c, service, c.start_ns, t.inject_ns), phase(c, service, t.inject_ns, t.end_ns)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_scenario_logs_on_the_spans_that_wrote_them(scenario: str) -> None:
    c = case(scenario, 2, compiled(scenario.split("-")[0]).topology.default_rate / 4)
    assert c.log_records > 0.3 * c.spans
    for batch in c.logs:
        assert len(batch) and np.all(np.diff(batch.time_ns) >= 0)
        assert c.start_ns <= int(batch.time_ns[0]) and int(batch.time_ns[-1]) < c.end_ns
    logs, _, names = records(c)
    s: SpanBatch = spans(c)
    joined = logs.span_id != 0
    assert joined.mean() > 0.5  # the rest: background threads, on no span
    order = np.argsort(s.span_id)
    at = order[np.minimum(np.searchsorted(s.span_id[order], logs.span_id[joined]), len(s) - 1)]
    assert np.array_equal(s.span_id[at], logs.span_id[joined])  # every span id is a span of the case
    assert np.array_equal(s.trace_id[at], logs.trace_id[joined])
    assert np.array_equal(np.asarray(s.strings, object)[s.service[at]], names[joined])  # written by its own service
    assert (s.start_ns[at] <= logs.time_ns[joined]).all() and (logs.time_ns[joined] <= s.end_ns[at]).all()
    assert not (logs.trace_id[~joined].any() or (s.peer[at] >= 0).any())  # no records on database calls
    assert not any(n.startswith("vllm-worker-") for n in set(names.tolist()))  # GPU workers write none


def test_logs_are_deterministic_per_seed() -> None:
    a, b = simulate("boutique-errors", seed=7, rate=1.0), simulate("boutique-errors", seed=7, rate=1.0)
    assert len(a.logs) == len(b.logs)
    for x, y in zip(a.logs, b.logs, strict=True):
        assert x.body == y.body and np.array_equal(x.time_ns, y.time_ns) and np.array_equal(x.span_id, y.span_id)
        assert np.array_equal(x.severity, y.severity) and x.strings == y.strings
    c = simulate("boutique-errors", seed=8, rate=1.0)
    assert concat_logs(list(c.logs)).body[:100] != concat_logs(list(a.logs)).body[:100]


def test_bodies_vary_so_that_masking_matters() -> None:
    logs, templates, _ = records(case("boutique-latency"))
    assert len(set(logs.body)) > 0.6 * len(logs)  # ids, times and sizes differ per record
    assert 20 <= len(set(templates.tolist())) < 0.01 * len(logs)


def test_healthy_noisy_services_warn_and_err_in_the_baseline() -> None:
    c = case("boutique-latency")
    logs, _, names = records(c)
    before = logs.time_ns < c.truth.inject_ns
    warned = set(names[before & (logs.severity >= SEVERITY_WARN)].tolist())
    assert {"adservice", "recommendationservice", "shoppingassistantservice"} & warned


@pytest.mark.parametrize("scenario", ["boutique-errors", "llm-errors", "mesh200-errors", "boutique-errors-partial"])
def test_errors_root_writes_error_templates_the_baseline_rarely_has(scenario: str) -> None:
    """New error or exception templates, or ones background errors wrote now and then, three
    times as often."""
    for seed in strong_seeds(scenario, 0.1, 3):
        c = case(scenario, seed)
        before, during = before_during(c, c.truth.service)
        seen_before, seen_during = before.templates, during.templates
        assert any(seen_during[t] * before.spans > 3 * seen_before[t] * during.spans for t in during.errors)


def test_a_callee_defect_shows_in_its_callers_logs() -> None:
    c = case("llm-errors", strong_seeds("llm-errors", 0.3, 1)[0])
    logs, templates, names = records(c)
    t = c.truth
    about = np.asarray([t.service in x for x in templates.tolist()]) & (names != t.service)
    failed = about & (logs.severity >= SEVERITY_WARN)
    before = int((failed & (logs.time_ns < t.inject_ns)).sum()) / (t.inject_ns - c.start_ns)
    during = int((failed & (logs.time_ns >= t.inject_ns) & (logs.time_ns < t.end_ns)).sum()) / (t.end_ns - t.inject_ns)
    assert during > 10 * before and during * 1e9 > 0.1  # calls to the root fail, their callers say so


def shares(before: Phase, during: Phase) -> dict[str, float]:
    """Each template's records per span during the fault over before it (templates seen 20 times before)."""
    return {
        k: (during.templates[k] / during.spans) / (n / before.spans) for k, n in before.templates.items() if n >= 20
    }


def test_call_structure_root_stops_writing_a_code_path() -> None:
    found = 0
    for seed in strong_seeds("boutique-call_structure", 0.7, 12):  # not every change skips code that logs
        c = case("boutique-call_structure", seed)
        before, during = before_during(c, c.truth.service)
        found += min(shares(before, during).values()) < 0.5
    assert found >= 3


def test_call_structure_root_may_say_why_it_skips_a_call() -> None:
    c = case("boutique-call_structure", 2)
    before, during = before_during(c, c.truth.service)
    new = set(during.templates) - set(before.templates) - during.errors
    assert any(during.templates[k] > 0.05 * during.spans for k in new)


@pytest.mark.parametrize("scenario", ["boutique-latency", "mesh200-latency", "llm-latency"])
def test_latency_writes_no_new_error_templates_at_the_root(scenario: str) -> None:
    for seed in (1, 2, 3):
        c = case(scenario, seed)
        before, during = before_during(c, c.truth.service)
        new = during.errors - set(before.templates)  # at most a rare background error first seen now
        assert sum(during.templates[t] for t in new) <= max(3, 0.02 * during.spans)


def test_magnitudes_differ_across_seeds() -> None:
    exception_share, volume = [], []
    for seed in range(1, 9):
        c = case("llm-errors", seed)
        before, during = before_during(c, c.truth.service)
        s = spans(c)
        root = (np.asarray(s.strings, object)[s.service] == c.truth.service) & (s.kind == KIND_SERVER)
        fault = (s.start_ns >= c.truth.inject_ns) & (s.start_ns < c.truth.end_ns)
        new = during.errors - set(before.templates)
        exception_share.append(sum(during.templates[t] for t in new) / int((root & fault & s.error).sum()))
        volume.append(c.log_records / c.spans)
    assert max(exception_share) > 2 * min(exception_share)
    assert max(volume) > 1.2 * min(volume)


def test_the_graph_joins_the_records_to_their_operations() -> None:
    c = case("boutique-errors")
    graph = ServiceGraph(window_seconds=10.0, retention_seconds=86_400.0)
    for batch in c.batches:
        graph.add(batch)
    for logs in c.logs:
        graph.add_logs(logs)
    series = window_series(graph, c.start_ns, c.start_ns, c.end_ns)
    assert series.log_ops.keys.shape[0] > 0
    joined = sum(int((b.span_id != 0).sum()) for b in c.logs)
    assert series.log_ops.sums[..., LogSum.RECORDS].sum() == joined
    assert series.logs.sums[..., LogSum.RECORDS].sum() == c.log_records
