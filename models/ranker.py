"""`BayesianRanker`: the root-cause ranker rca serves (an estimator in scikit-learn's manner).

`rank` extracts the window's evidence, builds the causal structure from the alerting nodes and
returns every candidate with its exact posterior probability, its most probable fault class,
the evidence behind it and its path to the alert. `fit` re-estimates the health model's
parameters from labelled cases (`models.fitting`); unfitted, the shipped parameters apply
(`models/params.json`, fitted on simulated cases by `python -m benchmarks.train`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from models.health import HealthParams, load_params, params_version
from models.multiroot import compare_roots
from models.posterior import log_posterior_and_lockstep
from models.structure import CausalStructure, StructureCache
from rca.evidence.nodes import FAULTS, NodeEvidence, extract_evidence
from rca.graph.series import SeriesCache
from rca.graph.service_graph import ServiceGraph
from rca.ranking.causes import Cause, Evidence, Ranking, SimultaneousRoot, from_columns

MODEL_NAME = "bayesian-health-enumeration"  # CAUSES.model.name is this @ the parameters' version
EVIDENCE_PER_CAUSE = 4
SIMULTANEOUS_MIN_PROBABILITY = 0.01  # several roots: those less likely to be one are left out


class BayesianRanker:
    """Exact single-root posterior over the service graph's nodes and the fault classes."""

    def __init__(self, *, params: HealthParams | None = None, history_seconds: float = 600.0) -> None:
        self.params = params
        self.history_seconds = history_seconds

    def _active_params(self) -> HealthParams:
        fitted: HealthParams | None = getattr(self, "params_", None)
        return fitted or self.params or load_params()

    @property
    def model_name(self) -> str:
        """`MODEL_NAME@version`, the version naming the parameters in use (`params_version`)."""
        return f"{MODEL_NAME}@{params_version(self._active_params())}"

    def fit(
        self,
        cases: Sequence[tuple[NodeEvidence, Sequence[str], str, str]],
        calibration_cases: Sequence[tuple[NodeEvidence, Sequence[str], str, str]] = (),
    ) -> BayesianRanker:
        """Learns the health parameters from (evidence, alerting nodes, true node, true fault) cases;
        the temperature from `calibration_cases`, cases apart from those, where given."""
        from models.fitting import fit_params

        self.params_ = fit_params(cases, self.params or HealthParams(), calibration_cases=calibration_cases)
        return self

    def evidence(self, graph: ServiceGraph, *, start_ns: int, end_ns: int) -> NodeEvidence:
        """What `rank` reasons over: the window's evidence against its baseline and history. The
        window series of the last call is kept (`SeriesCache`): ranking an incident again
        rebuilds only the windows that changed."""
        if getattr(self, "_series_cache", None) is None:
            self._series_cache = SeriesCache()
        history_ns = int(self.history_seconds * 1e9)
        return extract_evidence(
            graph, start_ns=start_ns, end_ns=end_ns, history_ns=history_ns, cache=self._series_cache
        )

    def rank(self, graph: ServiceGraph, *, alert_nodes: Sequence[str], start_ns: int, end_ns: int) -> Ranking:
        began = time.perf_counter()
        evidence = self.evidence(graph, start_ns=start_ns, end_ns=end_ns)
        causes, simultaneous = self.explain(evidence, alert_nodes)
        onset = None
        if causes:
            top = evidence.index(causes[0].node)
            onset_ns = int(evidence.onset_ns[top, FAULTS.index(causes[0].fault)])
            onset = onset_ns if onset_ns >= 0 else None
        ms = (time.perf_counter() - began) * 1e3
        return Ranking(start_ns, end_ns, self.model_name, ms, causes, onset, simultaneous)

    def causes(self, evidence: NodeEvidence, alert_nodes: Sequence[str]) -> tuple[Cause, ...]:
        """Every candidate, most probable first, from already extracted evidence."""
        return self.explain(evidence, alert_nodes)[0]

    def explain(
        self, evidence: NodeEvidence, alert_nodes: Sequence[str]
    ) -> tuple[tuple[Cause, ...], tuple[SimultaneousRoot, ...]]:
        """`causes`, and the roots of `Ranking.simultaneous`: several at once where two explain
        the evidence better than one (`models.multiroot`), else none."""
        if not evidence.nodes:
            return (), ()
        if getattr(self, "_structure_cache", None) is None:
            self._structure_cache = StructureCache()
        structure = self._structure_cache.get(evidence, alert_nodes)
        params = self._active_params()
        log_post, lockstep = log_posterior_and_lockstep(evidence.score, structure, params)
        posterior = np.exp(log_post)
        rows, dominant, merged = _reported(evidence, structure.candidates, posterior)
        node_p = merged.sum(axis=1)
        node_p = node_p / node_p.sum()
        fault = merged.argmax(axis=1)
        order = np.argsort(-node_p, kind="stable")
        shown_rows, reported = dominant[order].tolist(), rows[order].tolist()
        names, services = evidence.nodes, evidence.services
        node_name = names.__getitem__
        columns = {
            "rank": range(1, len(reported) + 1),
            "node": [names[row] for row in reported],
            "service": [services[row] for row in reported],
            "fault": [FAULTS[k] for k in fault[order].tolist()],
            "probability": node_p[order].tolist(),
            "evidence": _evidence(evidence, shown_rows, fault[order]),
            "path": [
                (names[row], *map(node_name, path[1:]))
                for row, path in zip(reported, structure.paths(shown_rows), strict=True)
            ],
        }
        causes = tuple(from_columns(Cause, columns))
        return causes, _several_roots(evidence, structure, log_post, lockstep / params.temperature, params)


def _reported(
    evidence: NodeEvidence, candidates: npt.NDArray[np.int64], posterior: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """A network node is reported as its callee: (reported rows, the candidate row whose evidence
    and path each shows, the posterior summed per reported row)."""
    network = evidence.network[candidates]
    if not network.any():
        return candidates, candidates, posterior
    rows, group = np.unique(_report_rows(evidence, candidates), return_inverse=True)
    merged = np.zeros((rows.shape[0], posterior.shape[1]))
    np.add.at(merged, group, posterior)
    by_mass = np.lexsort((-posterior.sum(axis=1), group))  # per group, most probable first
    first = by_mass[np.r_[True, group[by_mass][1:] != group[by_mass][:-1]]]
    return rows, candidates[first], merged


def _report_rows(evidence: NodeEvidence, candidates: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The row each candidate is reported as: a network node as its callee (where a candidate)."""
    owner = evidence.owner[candidates]
    return np.where(evidence.network[candidates] & np.isin(owner, candidates), owner, candidates)


def _several_roots(
    evidence: NodeEvidence,
    structure: CausalStructure,
    log_post: npt.NDArray[np.float64],
    lockstep: npt.NDArray[np.float64],
    params: HealthParams,
) -> tuple[SimultaneousRoot, ...]:
    """Each root with its probability of being one of several, best first, where two roots
    explain the evidence better than one (`models.multiroot.compare_roots`); else none."""
    candidates = structure.candidates
    report = np.searchsorted(candidates, _report_rows(evidence, candidates))
    compared = compare_roots(evidence.score[candidates], structure, log_post, params, report=report, lockstep=lockstep)
    if compared is None or compared.log_odds <= 0.0:
        return ()
    shown = compared.probability >= SIMULTANEOUS_MIN_PROBABILITY
    rows = candidates[compared.nodes[shown]].tolist()
    return tuple(
        SimultaneousRoot(evidence.nodes[row], evidence.services[row], FAULTS[k], p)
        for row, k, p in zip(rows, compared.classes[shown].tolist(), compared.probability[shown].tolist(), strict=True)
    )


def _evidence(evidence: NodeEvidence, rows: list[int], classes: npt.NDArray[np.int64]) -> list[tuple[Evidence, ...]]:
    """The measured signals of each row: the signal of the row's reported class first, then the
    strongest others that shifted at all (finite values only: JSON has no NaN). Selected as
    arrays, then made into objects in one pass (every candidate has its class's)."""
    score, observed, baseline = evidence.score[rows], evidence.observed[rows], evidence.baseline[rows]
    own = np.arange(score.shape[1])[None, :] == np.asarray(classes)[:, None]
    shown = np.isfinite(score) & np.isfinite(observed) & np.isfinite(baseline) & (own | (score > 0))
    key = np.where(shown, np.where(own, -np.inf, -score), np.inf)
    order = np.argsort(key, axis=1, kind="stable")[:, :EVIDENCE_PER_CAUSE]
    at, column = np.nonzero(np.take_along_axis(shown, order, axis=1))
    column = order[at, column]
    signals = evidence.signal
    names = [signals[row][j] for row, j in zip(np.asarray(rows)[at].tolist(), column.tolist(), strict=True)]
    made = from_columns(
        Evidence,
        {
            "signal": names,
            "observed": observed[at, column].tolist(),
            "baseline": baseline[at, column].tolist(),
            "score": score[at, column].tolist(),
        },
    )
    ends = np.cumsum(np.bincount(at, minlength=len(rows))).tolist()
    return [tuple(made[start:end]) for start, end in zip([0, *ends[:-1]], ends, strict=True)]
