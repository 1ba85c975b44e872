"""The startup ranking: a real ranking of its synthetic graph, and one the service runs."""

from __future__ import annotations

from models.ranker import BayesianRanker
from rca.ranking.warmup import warm_up
from rca.telemetry.faults import Fault


def test_the_warm_up_ranks_its_failing_callee_first() -> None:
    ranking = warm_up(BayesianRanker(), window_seconds=10.0)
    top = ranking.causes[0]
    assert top.node == "backend" and top.fault in (Fault.LATENCY, Fault.ERRORS)
    assert top.probability > 0.9
    assert [c.node for c in ranking.causes] == ["backend", "frontend"]
