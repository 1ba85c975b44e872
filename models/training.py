"""The simulated training cases the health model is fitted on (`rca fit`, `python -m benchmarks.train`).

A case is the evidence rca sees one replay-minute past the case's first alert, with its truth.
Training seeds are disjoint from the seeds the benchmark scores, and no Nezha case is used, so
the benchmark's figures are held-out figures.
"""

from __future__ import annotations

from collections.abc import Sequence

from models.fitting import Case
from rca.alerts import parse_rfc3339_ns
from rca.evidence import NETWORK_MIN_SCORE, extract_evidence
from rca.graph import ServiceGraph
from rca.simulation import SCENARIOS, simulate

TRAINING_SEEDS = (1, 2)
LOOKBACK_NS = 300 * 1_000_000_000
HISTORY_NS = 600 * 1_000_000_000
REPLAY_PAST_ALERT_NS = 60 * 1_000_000_000  # what the benchmark replays past the first alert
TRAINING_SCENARIOS = tuple(s for s in SCENARIOS if not s.startswith("mesh1000"))


def training_case(scenario: str, seed: int, *, every_network_node: bool = False) -> Case:
    """The evidence rca sees when the case's first alert arrives, with its truth; with
    `every_network_node`, quiet network nodes too (for fitting: see `extract_evidence`)."""
    case = simulate(scenario, seed=seed)
    graph = ServiceGraph(retention_seconds=3600.0)
    alert_ns = min(parse_rfc3339_ns(str(a["startsAt"])) or 0 for w in case.webhooks for a in w["alerts"])  # type: ignore[attr-defined]
    cut_ns = alert_ns + REPLAY_PAST_ALERT_NS
    for batch in case.batches:  # what the benchmark replays before its webhook, spans then logs
        graph.add(batch.select(batch.start_ns < cut_ns))
    for logs in case.logs:
        graph.add_logs(logs.select(logs.time_ns < cut_ns))
    end_ns = graph.newest_ns + 1
    evidence = extract_evidence(
        graph,
        start_ns=alert_ns - LOOKBACK_NS,
        end_ns=end_ns,
        history_ns=HISTORY_NS,
        network_min_score=0.0 if every_network_node else NETWORK_MIN_SCORE,
    )
    return evidence, case.truth.alert_services, case.truth.node, case.truth.fault


def training_cases(scenarios: Sequence[str] = TRAINING_SCENARIOS, seeds: Sequence[int] = TRAINING_SEEDS) -> list[Case]:
    """Every (scenario, seed) training case, quiet network nodes included."""
    return [training_case(s, seed, every_network_node=True) for seed in seeds for s in scenarios]
