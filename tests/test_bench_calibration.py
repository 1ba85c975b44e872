"""Calibration in the benchmarks: reliability bins, rca's mean top-1 probability in `rca bench`'s
report and table, its reliability panel, and the in-process held-out evaluation by class."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib
import numpy as np
import pytest

from benchmarks.accuracy import _Scores, _table
from benchmarks.heldout import _seeds, llm_scores_scaled, main, score_case
from benchmarks.plot import ReliabilityBin, plot_report, reliability_bins
from models.health import LLM_FAULTS, load_params
from models.ranker import BayesianRanker
from models.training import simulated_case, training_case
from rca.evidence.nodes import WAIT, F


def test_reliability_bins_on_a_hand_made_list() -> None:
    probabilities = [0.05, 0.15, 0.5, 0.55, 0.95, 1.0, 0.85]
    hits = [False, True, True, False, True, True, False]
    bins = reliability_bins(probabilities, hits, bins=5)
    assert [(b.low, b.high, b.cases) for b in bins] == [
        (0.0, 0.2, 2),
        (0.4, 0.6, 2),
        (0.8, 1.0, 3),
    ]  # empty bins left out
    assert [b.accuracy for b in bins] == pytest.approx([0.5, 0.5, 2 / 3])
    assert [b.mean_probability for b in bins] == pytest.approx([0.1, 0.525, 2.8 / 3])
    assert reliability_bins([0.25, 0.5], [True, True], bins=1) == [ReliabilityBin(0.0, 1.0, 2, 0.375, 1.0)]
    assert reliability_bins([], []) == []


@pytest.mark.parametrize(
    ("probabilities", "hits", "bins", "message"),
    [
        ([0.5], [True, False], 5, "1 probabilities but 2 hits"),
        ([1.2], [True], 5, "lie in"),
        ([0.5], [True], 0, "at least 1"),
    ],
)
def test_reliability_bins_refuse_bad_input(
    probabilities: list[float], hits: list[bool], bins: int, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        reliability_bins(probabilities, hits, bins=bins)


def test_rca_summary_has_its_mean_top1_probability_and_the_table_prints_the_gap() -> None:
    rca, peer = _Scores(), _Scores()
    for position, probability in ((1, 0.9), (1, 0.7), (3, 0.4), (1, 0.6)):
        rca.add(position, 0.01, True, probability)
        peer.add(position, 0.01, None, None)
    summary = rca.summary()
    contract = {"AC@1", "AC@3", "Avg@5", "fault@1", "seconds_per_case"}
    assert set(summary) == contract | {"mean_top1_probability"} and set(peer.summary()) == contract
    assert summary["mean_top1_probability"] == pytest.approx(0.65) and summary["AC@1"] == 0.75
    report = {"suite": "x", "signals": "traces", "cases": 4, "methods": {"rca": summary, "threshold": peer.summary()}}
    table = _table(report, {})
    assert "rca calibration: mean top-1 probability 0.65 against AC@1 0.75 (gap 0.10)" in table
    assert "calibration" not in _table(report | {"methods": {"threshold": peer.summary()}}, {})


def test_plot_adds_rca_reliability_panel_beside_the_bars(tmp_path: Path) -> None:
    scores = {"AC@1": 0.5, "AC@3": 1.0, "Avg@5": 0.9}
    report = {"suite": "x", "cases": 2, "methods": {"rca": scores, "threshold": scores}}
    breakdown = {"rca/latency": scores, "threshold/latency": scores}
    per_case = [
        {"rank": {"rca": 1, "threshold": 2}, "probability": 0.9},
        {"rank": {"rca": 4, "threshold": 1}, "probability": 0.3},
    ]
    out = tmp_path / "plot.svg"
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # text kept as text, to be read back
        plot_report(report, breakdown, out, per_case)
    svg = out.read_text()
    assert "rca reliability (top-1)" in svg and svg.count("n=1") == 2
    assert "all cases" in svg and "latency" in svg  # the bars are still drawn
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        plot_report(report, breakdown, out)  # without per-case rows: the bars only
    assert "rca reliability" not in out.read_text()


def test_heldout_prints_a_table_that_a_direct_computation_agrees_with(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "heldout.json"
    assert main(["--scenarios", "boutique-errors", "--seeds", "101", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    written = json.loads(out.read_text())
    assert written["scenarios"] == ["boutique-errors", "boutique-errors-partial"] and written["seeds"] == [101]
    ranker = BayesianRanker(params=load_params())
    hits, nodes, faults, probabilities = [], [], [], []
    for scenario in written["scenarios"]:
        evidence, alerts, node, fault = training_case(scenario, 101)
        causes = ranker.causes(evidence, alerts)
        hits.append(causes[0].service == evidence.services[evidence.index(node)])
        nodes.append(causes[0].node == node)
        faults.append(causes[0].fault == fault)
        probabilities.append(causes[0].probability)
    overall = written["classes"]["all"]
    assert set(written["classes"]) == {"errors", "all"} and overall["cases"] == 2
    assert overall["AC@1"] == sum(hits) / 2 and overall["fault@1"] == sum(faults) / 2
    assert overall["node@1"] == sum(nodes) / 2
    assert overall["mean_top1_probability"] == pytest.approx(sum(probabilities) / 2)
    ac1, fault1, p1 = sum(hits) / 2, sum(faults) / 2, sum(probabilities) / 2
    node1 = sum(nodes) / 2
    row = f"| all | 2 | {ac1:.2f} | {overall['AC@3']:.2f} | {node1:.2f} | {fault1:.2f} | {p1:.2f} |"
    assert row in printed.splitlines()
    assert "held-out evaluation: profile default, seeds 101, 2 cases (2 scenarios)" in printed
    assert f"against node@1 {node1:.2f} (gap {abs(p1 - node1):.2f})" in printed
    assert ("misses" in printed) == (not all(hits))


def test_an_overlapping_fault_case_counts_either_root() -> None:
    scenario = "llm-scheduler_priority_inversion-double"
    scored = score_case(BayesianRanker(params=load_params()), scenario, 101)
    (evidence, alerts, _, _), truth = simulated_case(scenario, 101)
    services = list(dict.fromkeys(c.service for c in BayesianRanker(params=load_params()).causes(evidence, alerts)))
    roots = [r.service for r in truth.roots]
    assert len(set(roots)) == 2 and scored.truth == tuple(roots)
    assert scored.place == min(services.index(s) + 1 for s in roots if s in services)
    assert scored.case == f"{scenario}#101" and 0.0 < scored.probability <= 1.0


def test_llm_scores_scaled_scales_those_classes_alone_and_the_evaluation_ranks_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = "llm-numa_mismatch"
    (evidence, alerts, _, _), _ = simulated_case(scenario, 101)
    scaled = llm_scores_scaled(evidence, 0.25)
    llm = [*(F[fault] for fault in LLM_FAULTS), WAIT]  # the classes' and the ranks' waits
    others = [k for k in range(evidence.score.shape[1]) if k not in llm]
    assert llm_scores_scaled(evidence, 1.0) is evidence
    assert np.array_equal(scaled.score[:, llm], evidence.score[:, llm] * 0.25, equal_nan=True)
    assert np.array_equal(scaled.score[:, others], evidence.score[:, others], equal_nan=True)
    assert np.nanmax(evidence.score[:, llm]) > 0  # the case has LLM evidence to scale (and it is left as it was)
    out = tmp_path / "faint.json"
    assert main(["--scenarios", scenario, "--seeds", "101", "--llm-score-scale", "0.25", "--json", str(out)]) == 0
    assert "seeds 101, LLM scores x0.25, 2 cases" in capsys.readouterr().out  # and its -double
    written = json.loads(out.read_text())
    ranker = BayesianRanker(params=load_params())
    top, unscaled = ranker.causes(scaled, alerts)[0], ranker.causes(evidence, alerts)[0]
    assert abs(top.probability - unscaled.probability) > 0.01  # fainter evidence, another ranking
    assert written["llm_score_scale"] == 0.25 and written["per_case"][0]["case"] == f"{scenario}#101"
    assert written["per_case"][0]["probability"] == pytest.approx(top.probability)
    assert written["per_case"][0]["top_node"] == top.node


def test_heldout_refuses_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--scenarios", "nope"]) == 2
    assert "no scenario starts with 'nope'" in capsys.readouterr().err
    bad = tmp_path / "params.json"
    bad.write_text("{}")
    assert main(["--scenarios", "boutique-errors", "--params", str(bad)]) == 2
    assert "not a health-parameters file" in capsys.readouterr().err
    for seeds in ("1,x", "101-", "3-1"):
        with pytest.raises(SystemExit):
            main(["--seeds", seeds])
    assert _seeds("101-103,110") == (101, 102, 103, 110)
    assert main(["--scenarios", "boutique-errors", "--seeds", "101", "--several-replicas"]) == 2
    assert "no case left to score" in capsys.readouterr().err
    for scale in ("0", "1.5", "x"):
        with pytest.raises(SystemExit):
            main(["--llm-score-scale", scale])
        assert "LLM score scale must be a number in (0, 1]" in capsys.readouterr().err
