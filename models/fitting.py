"""Estimating the health model from labelled cases, and checking its calibration.

The densities are fitted by moments on the roles the truth gives each node (the root's own
signals, its callers on the way to the alert, everyone else); the temperature, which sets how
sharp the posterior is, maximises the likelihood of the true roots, so the probabilities come
out calibrated rather than merely ordered.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from models.health import HealthParams
from models.posterior import log_posterior
from models.structure import CausalStructure, Relation, evidence_structure
from rca.evidence import N_FAULTS, F, NodeEvidence
from rca.ranking import Fault

Case = tuple[NodeEvidence, Sequence[str], str, str]  # evidence, alerting nodes, true node, true fault
TEMPERATURES = np.geomspace(0.25, 8.0, 31)
MIN_SAMPLES = 3
WEAKER = 0.5  # a related node's driven signal sits at least this much lower (log scale) than a root's


@dataclass(frozen=True, slots=True)
class _Labelled:
    evidence: NodeEvidence
    structure: CausalStructure
    root: int  # evidence row of the true node
    fault: int


def _labelled(cases: Sequence[Case]) -> list[_Labelled]:
    out = []
    for evidence, alerts, node, fault in cases:
        if node not in evidence.nodes:
            continue
        structure = evidence_structure(evidence, alerts)
        if evidence.index(node) in structure.candidates.tolist():
            out.append(_Labelled(evidence, structure, evidence.index(node), F[Fault(fault)]))
    return out


def _roles(case: _Labelled) -> tuple[npt.NDArray[np.float64], list[npt.NDArray[np.float64]]]:
    """Scores of the root, and of the nodes in each relation to it (`Relation.NONE` first)."""
    position = int(np.searchsorted(case.structure.candidates, case.root))
    relation = case.structure.relation[position].copy()
    relation[position] = -1
    score = case.evidence.score[case.structure.candidates]
    return score[position], [score[relation == k] for k in Relation]


def _share_above(values: npt.NDArray[np.float64], threshold: float) -> float:
    values = values[~np.isnan(values)]
    return float((values > threshold).mean()) if values.shape[0] else math.nan


def fit_params(cases: Sequence[Case], initial: HealthParams) -> HealthParams:
    """Parameters re-estimated from the labelled cases; what the data can't tell stays as `initial`."""
    labelled = _labelled(cases)
    if not labelled:
        raise ValueError("no case has its true node among the candidates")
    roots, related = zip(*(_roles(c) for c in labelled), strict=True)
    healthy = np.concatenate([r[Relation.NONE] for r in related])
    scale, tail, tail_mean = list(initial.healthy_scale), list(initial.tail_weight), list(initial.tail_mean)
    loc, spread = list(initial.fault_loc), list(initial.fault_scale)
    activation = [list(row) for row in initial.activation]
    relation_weight = [list(row) for row in initial.relation_weight]
    relation_loc = [list(row) for row in initial.relation_loc]
    for f in range(N_FAULTS):
        h = healthy[:, f][~np.isnan(healthy[:, f])]
        if h.shape[0] >= MIN_SAMPLES * 10:
            scale[f] = max(0.5, math.sqrt(float(np.median(h**2)) / 0.455))  # median of chi-square(1)
            threshold = 4 * scale[f]
            beyond = h[h > threshold]
            if beyond.shape[0] >= MIN_SAMPLES:  # an exponential tail seen above the threshold (memoryless)
                tail_mean[f] = max(0.5, float((beyond - threshold).mean()))
                share = beyond.shape[0] / h.shape[0] * math.exp(threshold / tail_mean[f])
                tail[f] = min(0.3, max(0.002, share))
        own = np.asarray([r[f] for r, c in zip(roots, labelled, strict=True) if c.fault == f])
        own = own[~np.isnan(own)]
        if own.shape[0] >= MIN_SAMPLES:
            logs = np.log(own + 1.0)
            loc[f], spread[f] = float(logs.mean()), max(0.3, float(logs.std()))
        for k in list(Relation)[1:]:
            scores = np.concatenate([r[k][:, f] for r in related])
            above = _share_above(scores, 4 * scale[f])
            if not math.isnan(above):
                relation_weight[k][f] = min(0.9, max(0.01, above - tail[f]))
            driven = scores[scores > 4 * scale[f]]
            spread_at = float(np.log(driven + 1.0).mean()) if driven.shape[0] >= MIN_SAMPLES else math.inf
            relation_loc[k][f] = min(loc[f] - WEAKER, spread_at)
        for c in range(N_FAULTS):
            of_class = np.asarray([r[f] for r, k in zip(roots, labelled, strict=True) if k.fault == c])
            share = _share_above(of_class, 4 * scale[f]) if of_class.shape[0] >= MIN_SAMPLES else math.nan
            if not math.isnan(share):
                low, high = (0.7, 0.98) if c == f else (0.02, 0.9)
                activation[c][f] = min(high, max(low, share))
    fitted = replace(
        initial,
        healthy_scale=tuple(scale),
        tail_weight=tuple(tail),
        tail_mean=tuple(tail_mean),
        fault_loc=tuple(loc),
        fault_scale=tuple(spread),
        activation=tuple(tuple(row) for row in activation),
        relation_weight=tuple(tuple(row) for row in relation_weight),
        relation_loc=tuple(tuple(row) for row in relation_loc),
    )
    fits = [(_truth_log_likelihood(labelled, replace(fitted, temperature=float(t))), float(t)) for t in TEMPERATURES]
    return replace(fitted, temperature=max(fits)[1])


def _node_posterior(case: _Labelled, params: HealthParams) -> npt.NDArray[np.float64]:
    probs = np.exp(log_posterior(case.evidence.score, case.structure, params))
    return np.asarray(probs.sum(axis=1), np.float64)


def _truth_log_likelihood(cases: Sequence[_Labelled], params: HealthParams) -> float:
    total = 0.0
    for case in cases:
        p = _node_posterior(case, params)
        total += math.log(max(float(p[int(np.searchsorted(case.structure.candidates, case.root))]), 1e-12))
    return total


@dataclass(frozen=True, slots=True)
class Calibration:
    """Mean top-1 probability against top-1 accuracy over a set of cases."""

    cases: int
    mean_top1_probability: float
    top1_accuracy: float

    @property
    def gap(self) -> float:
        return abs(self.mean_top1_probability - self.top1_accuracy)


def calibration(cases: Sequence[Case], params: HealthParams) -> Calibration:
    labelled = _labelled(cases)
    probabilities, hits = [], []
    for case in labelled:
        p = _node_posterior(case, params)
        top = int(np.argmax(p))
        probabilities.append(float(p[top]))
        hits.append(int(case.structure.candidates[top]) == case.root)
    count = len(labelled)
    return Calibration(
        count, float(np.mean(probabilities)) if count else math.nan, float(np.mean(hits)) if count else math.nan
    )
