"""`rca fit`: the health model re-estimated from responders' labels and simulated cases.

Each label whose node was among the candidates the model saw becomes a case: the evidence and
alerting nodes stored with it (`rca.feedback`), its node and fault. They join the simulated
training cases (`models.training`), and `BayesianRanker.fit` starts from the shipped parameters.

A label without a fault (`null`: the responder found where, not what) takes the class the shipped
parameters find most probable at its node, given that the node is the root. It so teaches what
the node-level parts of the model learn (how sharp the posterior is, how the root's callers and
peers behave, what healthy nodes look like) at full weight, and adds to its class's signature
only what the evidence at the node already said.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TextIO

import numpy as np

from models.fitting import Calibration, Case, calibration
from models.health import HealthParams, load_params, params_version, save_params
from models.posterior import log_posterior
from models.ranker import MODEL_NAME, BayesianRanker
from models.structure import evidence_structure
from models.training import TRAINING_SCENARIOS, TRAINING_SEEDS, training_cases
from rca.evidence import FAULTS
from rca.labels import LabelledIncident
from rca.store import IncidentStore, StoreError

log = logging.getLogger("rca.fit")


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
    labelled: Sequence[LabelledIncident], simulated: Sequence[Case], initial: HealthParams
) -> tuple[HealthParams, FitSummary]:
    """Parameters fitted on the usable labels and the simulated cases; ValueError when there
    is no case to fit."""
    from_labels = [c for c in (label_case(x, initial) for x in labelled) if c is not None]
    cases = [*from_labels, *simulated]
    if not cases:
        raise ValueError("no cases: no label names a node the model saw, and no simulated cases were asked for")
    params = BayesianRanker(params=initial).fit(cases).params_
    fit = calibration(cases, params)
    return params, FitSummary(len(labelled), len(from_labels), len(simulated), fit, params_version(params))


def _write(params: HealthParams, out: Path) -> None:
    """Written beside, then moved into place: a reader sees the old file or the new, never half."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial")
    save_params(params, partial)
    os.replace(partial, out)


def run_fit(
    db: str,
    out: Path,
    *,
    scenarios: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    stdout: TextIO | None = None,
) -> int:
    """`rca fit`: reads the labels in `db`, simulates the training cases (`scenarios` x `seeds`,
    by default `models.training`'s), fits, writes `out` and prints a one-line JSON summary;
    returns 2 with a message on stderr when the database, the simulation or the fit fails."""
    try:
        store = IncidentStore.open(db, create=False)
        try:
            labelled, unreadable = store.labelled()
        finally:
            store.close()
        for incident, reason in unreadable.items():
            log.warning("the label of incident %s is left out: %s", incident, reason)
        log.info("%d labelled incidents; simulating the training cases", len(labelled))
        simulated = training_cases(
            TRAINING_SCENARIOS if scenarios is None else scenarios, TRAINING_SEEDS if seeds is None else seeds
        )
        params, summary = fit_labelled(labelled, simulated, load_params())
        summary = replace(summary, unreadable=len(unreadable))
        _write(params, out)
    except (StoreError, ValueError, OSError) as exc:
        print(f"rca fit: {exc}", file=sys.stderr)
        return 2
    (stdout or sys.stdout).write(json.dumps(summary.json(out)) + "\n")
    return 0
