"""Fitting the health model on simulated cases, and its calibration on held-out ones.

The issue's bar: on simulated cases the mean top-1 probability tracks top-1 accuracy within 0.1.
Training and test cases come from disjoint seeds of the same scenarios, as `benchmarks.train` does.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from models.fitting import Case, calibration, fit_params
from models.health import HealthParams, load_params, save_params
from models.ranker import BayesianRanker
from models.structure import Relation
from models.training import training_case
from simulation import SCENARIOS

SCENARIOS_UNDER_TEST = tuple(s for s in SCENARIOS if s.startswith(("llm-", "boutique-")))
# Four seeds (~80 cases): fitted on two (~40), the temperature learned in-sample came out
# overconfident on the held-out seed (mean top-1 probability 0.95 against accuracy 0.71).
TRAINING, HELD_OUT = (1, 2, 4, 5), 3


@pytest.fixture(scope="module")
def cases() -> dict[int, list[Case]]:
    return {seed: [training_case(s, seed) for s in SCENARIOS_UNDER_TEST] for seed in (*TRAINING, HELD_OUT)}


@pytest.fixture(scope="module")
def ranker(cases: dict[int, list[Case]]) -> BayesianRanker:
    """Fitted once on the training seeds (the Pyro fit, `models.learning`)."""
    unfitted = BayesianRanker(params=HealthParams())
    assert not hasattr(unfitted, "params_")
    assert unfitted.fit([case for seed in TRAINING for case in cases[seed]]) is unfitted
    return unfitted


def test_fit_learns_parameters_and_keeps_the_estimator_contract(ranker: BayesianRanker) -> None:
    fitted = ranker.params_
    assert fitted != HealthParams()
    assert 0.25 <= fitted.temperature <= 8.0
    assert all(0.0 < a < 1.0 for row in fitted.activation for a in row)
    assert all(w == 0.0 for w in fitted.relation_weight[Relation.NONE])
    assert all(r > 0.0 for r in fitted.class_rate) and fitted.class_rate != HealthParams().class_rate
    assert fitted == load_params_roundtrip(fitted)


def test_a_parameters_file_from_before_the_class_rates_loads_with_equal_rates() -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "params.json"
        save_params(replace(HealthParams(), temperature=1.3), path)
        raw = json.loads(path.read_text())
        del raw["class_rate"]
        path.write_text(json.dumps(raw))
        loaded = load_params(path)
    assert loaded.class_rate == HealthParams().class_rate and loaded.temperature == 1.3


def load_params_roundtrip(params: HealthParams) -> HealthParams:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "params.json"
        save_params(params, path)
        return load_params(path)


def test_the_fit_sets_the_temperature_that_calibrates_its_own_cases(
    cases: dict[int, list[Case]], ranker: BayesianRanker
) -> None:
    training = [case for seed in TRAINING for case in cases[seed]]
    fitted = calibration(training, ranker.params_)
    assert fitted.gap <= 0.02, fitted
    # Either way of that temperature the two part: sharper is overconfident, flatter underconfident.
    sharper = calibration(training, replace(ranker.params_, temperature=ranker.params_.temperature / 2))
    flatter = calibration(training, replace(ranker.params_, temperature=ranker.params_.temperature * 2))
    assert sharper.mean_top1_probability - sharper.top1_accuracy > 0.02
    assert flatter.top1_accuracy - flatter.mean_top1_probability > 0.02


def test_given_cases_apart_the_fit_sets_the_temperature_on_them(cases: dict[int, list[Case]]) -> None:
    """Temperature scaling on a validation set: the rest of the fit is the same, the temperature the
    one that calibrates the cases apart (a short fit: the wiring, not the optimum, is under test)."""
    training, apart = cases[TRAINING[0]], cases[HELD_OUT]
    on_own = fit_params(training, HealthParams(), steps=25)
    on_apart = fit_params(training, HealthParams(), calibration_cases=apart, steps=25)
    # the tempered likelihood weighs against the untempered prior, so a case's top cause may turn at
    # a temperature: the gap crosses zero within one case's share of the accuracy
    assert calibration(apart, on_apart).gap <= 1 / len(apart)
    assert on_apart.temperature != on_own.temperature
    assert replace(on_apart, temperature=on_own.temperature) == on_own


def test_held_out_top1_probability_tracks_top1_accuracy(cases: dict[int, list[Case]], ranker: BayesianRanker) -> None:
    held_out = calibration(cases[HELD_OUT], ranker.params_)
    assert held_out.cases >= len(SCENARIOS_UNDER_TEST) - 2
    assert held_out.gap <= 0.1, held_out
    assert held_out.top1_accuracy >= 0.6


def test_shipped_parameters_rank_the_llm_faults_with_their_class(cases: dict[int, list[Case]]) -> None:
    ranker = BayesianRanker(params=load_params())
    hits, classes = [], []
    for evidence, alerts, node, fault in cases[HELD_OUT]:
        if not any(f in node or node.startswith("gpu:") for f in ("vllm", "gpu:")):
            continue
        top = ranker.causes(evidence, alerts)[0]
        hits.append(top.node == node or top.service == evidence.services[evidence.index(node)])
        classes.append(top.fault.value == fault)
    assert len(hits) >= 5
    # The project's bar for each LLM fault class: right at least 0.8 of the time, by node and by
    # class. (The `-peers` NCCL case is found by its rank's point-to-point latency, which its waiting
    # peers do not share.)
    assert float(np.mean(hits)) >= 0.8 and float(np.mean(classes)) >= 0.8
