"""Fitting the health model on simulated cases, and its calibration on held-out ones.

The issue's bar: on simulated cases the mean top-1 probability tracks top-1 accuracy within 0.1.
Training and test cases come from disjoint seeds of the same scenarios, as `benchmarks.train` does.
"""

from __future__ import annotations

import numpy as np
import pytest

from models.fitting import Case, calibration
from models.health import HealthParams, load_params
from models.ranker import BayesianRanker
from models.training import training_case
from rca.simulation import SCENARIOS

SCENARIOS_UNDER_TEST = tuple(s for s in SCENARIOS if s.startswith(("llm-", "boutique-")))


@pytest.fixture(scope="module")
def cases() -> dict[int, list[Case]]:
    return {seed: [training_case(s, seed) for s in SCENARIOS_UNDER_TEST] for seed in (1, 2, 3)}


def test_fit_learns_parameters_and_keeps_the_estimator_contract(cases: dict[int, list[Case]]) -> None:
    ranker = BayesianRanker(params=HealthParams())
    assert not hasattr(ranker, "params_")
    assert ranker.fit(cases[1] + cases[2]) is ranker
    fitted = ranker.params_
    assert fitted != HealthParams()
    assert 0.25 <= fitted.temperature <= 8.0
    assert all(0.0 < a < 1.0 for row in fitted.activation for a in row)


def test_held_out_top1_probability_tracks_top1_accuracy(cases: dict[int, list[Case]]) -> None:
    fitted = BayesianRanker(params=HealthParams()).fit(cases[1] + cases[2]).params_
    held_out = calibration(cases[3], fitted)
    assert held_out.cases >= len(SCENARIOS_UNDER_TEST) - 2
    assert held_out.gap <= 0.1, held_out
    assert held_out.top1_accuracy >= 0.6


def test_shipped_parameters_rank_the_llm_faults_with_their_class(cases: dict[int, list[Case]]) -> None:
    ranker = BayesianRanker(params=load_params())
    hits, classes = [], []
    for evidence, alerts, node, fault in cases[3]:
        if not any(f in node or node.startswith("gpu:") for f in ("vllm", "gpu:")):
            continue
        top = ranker.causes(evidence, alerts)[0]
        hits.append(top.node == node or top.service == evidence.services[evidence.index(node)])
        classes.append(top.fault.value == fault)
    assert len(hits) >= 5
    # Measured 6/6 classes and 5/6 nodes (one scheduler case misses); the `-peers` NCCL case is
    # found by its rank's point-to-point latency, which its waiting peers do not share.
    assert float(np.mean(hits)) >= 0.8 and float(np.mean(classes)) >= 0.8
