"""The simulated training cases the health model is fitted on (`rca fit`, `python -m benchmarks.train`).

A case is the evidence rca sees one replay-minute past the case's first alert, with its truth.
Training seeds are disjoint from the seeds the benchmark scores, only the default generator
profile is used (the `shifted` one is kept for the benchmark), and no Nezha case is used, so the
benchmark's figures are held-out figures. Each fault class gets about `CASES_PER_CLASS` cases:
a scenario takes as many seeds of the pool as its class needs (at least `MIN_SEEDS`), so the
classes with one scenario (most LLM faults) are not drowned by those with six. Only rca's own span
conventions are trained on: a joint fit with the simulator's `real` style (where the rank behind an
NCCL fault cannot be told apart) made ranks in the conventions style indistinguishable
(docs/benchmarks.md, 2026-12-05); `style` serves the held-out evaluation.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from models.fitting import Case
from rca.evidence.nodes import NETWORK_MIN_SCORE, extract_evidence
from rca.graph.service_graph import ServiceGraph
from rca.telemetry.alerts import parse_rfc3339_ns
from simulation import SCENARIOS, SimulatedCase, Truth, simulate
from simulation.scenarios import parse

CASES_PER_CLASS = 30
MIN_SEEDS = 8
TRAINING_SEEDS = tuple(range(1, CASES_PER_CLASS + 1))
# The temperature is set on cases apart from the fit's (`calibration_cases`): seeds of their own,
# eight, so that one scalar set on their top-1 accuracy does not move with a few cases.
CALIBRATION_SEEDS = tuple(range(CASES_PER_CLASS + 1, CASES_PER_CLASS + 9))
LOOKBACK_NS = 300 * 1_000_000_000
HISTORY_NS = 600 * 1_000_000_000
REPLAY_PAST_ALERT_NS = 60 * 1_000_000_000  # what the benchmark replays past the first alert
# one root per case: the overlapping-fault scenarios' second root would be a mislabelled cause
TRAINING_SCENARIOS = tuple(s for s in SCENARIOS if not s.startswith("mesh1000") and not s.endswith("-double"))


def training_case(
    scenario: str, seed: int, *, every_network_node: bool = False, profile: str = "default", style: str = "conventions"
) -> Case:
    """The evidence rca sees when the case's first alert arrives, with its truth; with
    `every_network_node`, quiet network nodes too (for fitting: see `extract_evidence`); `profile`
    names the simulator's profile (held-out evaluation only: training uses the default), `style`
    what its telemetry looks like (`simulation.simulate`)."""
    return simulated_case(scenario, seed, every_network_node=every_network_node, profile=profile, style=style)[0]


def replayed(case: SimulatedCase) -> tuple[ServiceGraph, int]:
    """What the benchmark replays before the case's webhook (the spans that ended, the log records
    and data points written, up to `REPLAY_PAST_ALERT_NS` past its first alert) as a graph, and
    the first alert's time."""
    alert_ns = min(parse_rfc3339_ns(str(a["startsAt"])) or 0 for w in case.webhooks for a in w["alerts"])  # type: ignore[attr-defined]
    cut_ns = alert_ns + REPLAY_PAST_ALERT_NS
    graph = ServiceGraph(retention_seconds=3600.0)
    for batch in case.batches:
        graph.add(batch.ended_before(cut_ns))
    for logs in case.logs:
        graph.add_logs(logs.select(logs.time_ns < cut_ns))
    for points in case.metrics:
        graph.add_metrics(points.select(points.time_ns < cut_ns))
    return graph, alert_ns


def simulated_case(
    scenario: str,
    seed: int,
    *,
    every_network_node: bool = False,
    profile: str = "default",
    style: str = "conventions",
    replica_names: str = "distinct",
) -> tuple[Case, Truth]:
    """`training_case` with the simulation's whole truth (`Truth.roots`: both roots of an
    overlapping-fault scenario), for held-out scoring (`benchmarks.heldout`); `replica_names` as
    `simulation.simulate` takes it."""
    case = simulate(scenario, seed=seed, profile=profile, style=style, replica_names=replica_names)
    graph, alert_ns = replayed(case)
    evidence = extract_evidence(
        graph,
        start_ns=alert_ns - LOOKBACK_NS,
        end_ns=graph.newest_ns + 1,
        history_ns=HISTORY_NS,
        network_min_score=0.0 if every_network_node else NETWORK_MIN_SCORE,
    )
    return (evidence, case.truth.alert_services, case.truth.node, case.truth.fault), case.truth


def training_plan(
    scenarios: Sequence[str] = TRAINING_SCENARIOS, seeds: Sequence[int] = TRAINING_SEEDS
) -> list[tuple[str, int]]:
    """The (scenario, seed) pairs of the training set: each scenario the first
    max(`MIN_SEEDS`, `CASES_PER_CLASS` / scenarios of its class) seeds of `seeds`."""
    per_class = Counter(parse(s)[1] for s in scenarios)
    take = {s: max(MIN_SEEDS, math.ceil(CASES_PER_CLASS / per_class[parse(s)[1]])) for s in scenarios}
    return [(s, seed) for i, seed in enumerate(seeds) for s in scenarios if i < take[s]]


def training_cases(scenarios: Sequence[str] = TRAINING_SCENARIOS, seeds: Sequence[int] = TRAINING_SEEDS) -> list[Case]:
    """Every case of the training plan (`training_plan`), quiet network nodes included."""
    return [training_case(s, seed, every_network_node=True) for s, seed in training_plan(scenarios, seeds)]


def calibration_cases(
    scenarios: Sequence[str] = TRAINING_SCENARIOS, seeds: Sequence[int] = CALIBRATION_SEEDS
) -> list[Case]:
    """The cases the fit's temperature is set on: every training scenario at each of `seeds`, which
    the fit does not see (scenarios alike, as the benchmark weighs them), with the evidence rca serves."""
    return [training_case(s, seed) for seed in seeds for s in scenarios]
