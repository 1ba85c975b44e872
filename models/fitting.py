"""Learning the health model from labelled cases, and checking its calibration.

`fit_params` learns every parameter with Pyro (`models.learning`: hierarchical priors across
fault classes and relations, MAP), from the scores each case's truth explains and the truth's
probability under the tempered posterior, so the probabilities come out calibrated rather than
merely ordered; `calibration` compares them with top-1 accuracy.

The truth's log probability is a proper score, and its optimum hedges: a few confident misses
cost more than many modest hits gain, so the learned temperature leaves the top probability
below the top-1 accuracy. The fit's last step (`calibrated`) therefore sets the temperature so
that the two agree, as post-hoc temperature scaling does, on calibration cases the fit did not
learn from where they are given (on its own cases a model ranks better than on new ones, and a
temperature set there is overconfident), else on the training cases; the rest of the parameters
stay as learned.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from models.health import HealthParams
from models.posterior import log_posterior
from models.structure import CausalStructure, evidence_structure
from rca.evidence.nodes import F, NodeEvidence
from rca.telemetry.faults import Fault

Case = tuple[NodeEvidence, Sequence[str], str, str]  # evidence, alerting nodes, true node, true fault
STEPS = 500  # optimisation steps of a fit
TEMPERATURE_RANGE = (0.05, 20.0)  # where `calibrated` looks, a factor either way of the learned one
BISECTIONS = 30  # halvings of that range (on the log scale): the temperature to ~1e-4 of itself


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


def fit_params(
    cases: Sequence[Case],
    initial: HealthParams,
    *,
    calibration_cases: Sequence[Case] = (),
    steps: int = STEPS,
    seed: int = 0,
) -> HealthParams:
    """Parameters learned from the labelled cases, starting from `initial`: `steps` seeded
    optimisation steps of `models.learning.learn` (the same cases and seed give the same fit),
    the temperature then set on `calibration_cases` (on `cases` where none is given)."""
    from models.learning import case_batch, learn  # torch and Pyro load only to fit

    labelled = _labelled(cases)
    if not labelled:
        raise ValueError("no case has its true node among the candidates")
    batch = case_batch(
        [
            (
                c.evidence.score[c.structure.candidates],
                c.structure.relation,
                int(np.searchsorted(c.structure.candidates, c.root)),
                c.fault,
            )
            for c in labelled
        ]
    )
    return calibrated(_labelled(calibration_cases) or labelled, learn(batch, initial, steps=steps, seed=seed))


def calibrated(cases: Sequence[_Labelled], params: HealthParams) -> HealthParams:
    """`params` with the temperature at which the cases' mean top-1 probability equals their
    top-1 accuracy (calibration in the large). A higher temperature flattens every posterior, so
    the gap falls as it rises; bisection on its log finds where it crosses zero, or the end of
    `TEMPERATURE_RANGE` the gap has not crossed by."""

    def gap(temperature: float) -> float:
        c = _calibration(cases, replace(params, temperature=temperature))
        return c.mean_top1_probability - c.top1_accuracy

    low, high = (math.log(params.temperature * f) for f in TEMPERATURE_RANGE)
    if gap(math.exp(low)) <= 0.0:
        return replace(params, temperature=math.exp(low))
    if gap(math.exp(high)) >= 0.0:
        return replace(params, temperature=math.exp(high))
    for _ in range(BISECTIONS):
        middle = 0.5 * (low + high)
        low, high = (middle, high) if gap(math.exp(middle)) > 0.0 else (low, middle)
    return replace(params, temperature=math.exp(0.5 * (low + high)))


def _node_posterior(case: _Labelled, params: HealthParams) -> npt.NDArray[np.float64]:
    probs = np.exp(log_posterior(case.evidence.score, case.structure, params))
    return np.asarray(probs.sum(axis=1), np.float64)


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
    return _calibration(_labelled(cases), params)


def _calibration(labelled: Sequence[_Labelled], params: HealthParams) -> Calibration:
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
