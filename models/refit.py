"""The health model re-estimated from responders' labels and simulated cases.

Each label whose node was among the candidates the model saw becomes a case: the evidence and
alerting nodes stored with it (`rca.incidents.feedback`), its node and fault. They join the simulated
training cases (`models.training`), and `BayesianRanker.fit` starts from the shipped parameters.

A label without a fault (`null`: the responder found where, not what) takes the class the shipped
parameters find most probable at its node, given that the node is the root. It so teaches what
the node-level parts of the model learn (how sharp the posterior is, how the root's callers and
peers behave, what healthy nodes look like) at full weight, and adds to its class's signature
only what the evidence at the node already said.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from models.fitting import Calibration, Case, calibration
from models.health import HealthParams, params_version
from models.posterior import log_posterior
from models.ranker import MODEL_NAME, BayesianRanker
from models.structure import evidence_structure
from rca.evidence.nodes import FAULTS
from rca.incidents.labels import LabelledIncident


@dataclass(frozen=True, slots=True)
class FitSummary:
    labelled: int  # labels in the database
    labelled_used: int  # those whose node was a candidate
    simulated: int
    calibration: Calibration  # in-sample, over every case the fit used
    version: str  # `params_version` of what was written
    unreadable: int = 0  # labels whose snapshot could not be read (left out)

    def json(self, out: Path) -> dict[str, object]:
        fit = self.calibration
        return {
            "event": "fit",
            "out": str(out),
            "model": f"{MODEL_NAME}@{self.version}",
            "version": self.version,
            "cases": fit.cases,
            "labelled": self.labelled,
            "labelled_used": self.labelled_used,
            "unreadable": self.unreadable,
            "simulated": self.simulated,
            "calibration": {"mean_top1_probability": fit.mean_top1_probability, "top1_accuracy": fit.top1_accuracy},
        }


def label_case(labelled: LabelledIncident, initial: HealthParams) -> Case | None:
    """The label as a fitting case, or None when its node was not a candidate (nothing to learn
    from); a label without a fault takes the class `initial` finds most probable there."""
    evidence, alerts, node = labelled.snapshot.evidence, labelled.snapshot.alert_nodes, labelled.label.node
    if not labelled.in_evidence:
        return None
    structure = evidence_structure(evidence, alerts)
    rows = structure.candidates.tolist()
    if evidence.index(node) not in rows:
        return None
    fault = labelled.label.fault
    if fault is None:
        posterior = log_posterior(evidence.score, structure, initial)
        fault = FAULTS[int(np.argmax(posterior[rows.index(evidence.index(node))]))]
    return evidence, alerts, node, fault.value


def fit_labelled(
    labelled: Sequence[LabelledIncident],
    simulated: Sequence[Case],
    initial: HealthParams,
    calibration_cases: Sequence[Case] = (),
) -> tuple[HealthParams, FitSummary]:
    """Parameters fitted on the usable labels and the simulated cases, the temperature set on
    `calibration_cases` where given (`models.fitting.fit_params`); ValueError when there is no
    case to fit."""
    from_labels = [c for c in (label_case(x, initial) for x in labelled) if c is not None]
    cases = [*from_labels, *simulated]
    if not cases:
        raise ValueError("no cases: no label names a node the model saw, and no simulated cases were asked for")
    params = BayesianRanker(params=initial).fit(cases, calibration_cases).params_
    fit = calibration(cases, params)
    return params, FitSummary(len(labelled), len(from_labels), len(simulated), fit, params_version(params))
