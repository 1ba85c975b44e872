"""Fits the shipped health parameters (`models/params.json`) on simulated training cases.

Training seeds (1, 2) are disjoint from the seeds the benchmark scores (`HELD_OUT_SEEDS`), and
no Nezha case is used, so the benchmark's figures are held-out figures.
"""

from __future__ import annotations

import sys

from api.timeparams import parse_time_ns
from benchmarks.accuracy import REPLAY_PAST_ALERT_NS
from benchmarks.cases import SIM_SCENARIOS
from models.fitting import Case, calibration
from models.health import SHIPPED, HealthParams, save_params
from models.ranker import BayesianRanker
from rca.evidence import NETWORK_MIN_SCORE, extract_evidence
from rca.graph import ServiceGraph
from rca.simulation import simulate

TRAINING_SEEDS = (1, 2)
LOOKBACK_NS = 300 * 1_000_000_000
HISTORY_NS = 600 * 1_000_000_000


def training_case(scenario: str, seed: int, *, every_network_node: bool = False) -> Case:
    """The evidence rca sees when the case's first alert arrives, with its truth; with
    `every_network_node`, quiet network nodes too (for fitting: see `extract_evidence`)."""
    case = simulate(scenario, seed=seed)
    graph = ServiceGraph(retention_seconds=3600.0)
    alert_ns = min(parse_time_ns(str(a["startsAt"])) for w in case.webhooks for a in w["alerts"])  # type: ignore[attr-defined]
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


def main() -> int:
    cases = [training_case(s, seed, every_network_node=True) for seed in TRAINING_SEEDS for s in SIM_SCENARIOS]
    params = BayesianRanker(params=HealthParams()).fit(cases).params_
    save_params(params, SHIPPED)
    fit = calibration(cases, params)
    print(
        f"fitted on {fit.cases} cases: mean top-1 probability {fit.mean_top1_probability:.2f}, "
        f"top-1 accuracy {fit.top1_accuracy:.2f}; wrote {SHIPPED}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
