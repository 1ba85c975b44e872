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
from models.posterior import log_posterior, observed
from models.structure import Relation, evidence_structure
from rca.evidence import FAULTS, NodeEvidence, extract_evidence
from rca.graph import ServiceGraph
from rca.ranking import Cause, Evidence, Ranking
from rca.series import SeriesCache

MODEL_NAME = "bayesian-health-enumeration"  # CAUSES.model.name is this @ the parameters' version
EVIDENCE_PER_CAUSE = 4


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

    def fit(self, cases: Sequence[tuple[NodeEvidence, Sequence[str], str, str]]) -> BayesianRanker:
        """Learns the health parameters from (evidence, alerting nodes, true node, true fault) cases."""
        from models.fitting import fit_params

        self.params_ = fit_params(cases, self.params or HealthParams())
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

    def simultaneous(self, evidence: NodeEvidence, alert_nodes: Sequence[str]) -> list[tuple[str, float]]:
        """The SVI variant: candidates with their fault intensity when several may be faulty."""
        return simultaneous_roots(evidence, alert_nodes, self._active_params())

    def rank(self, graph: ServiceGraph, *, alert_nodes: Sequence[str], start_ns: int, end_ns: int) -> Ranking:
        began = time.perf_counter()
        evidence = self.evidence(graph, start_ns=start_ns, end_ns=end_ns)
        causes = self.causes(evidence, alert_nodes)
        onset = None
        if causes:
            top = evidence.index(causes[0].node)
            onset_ns = int(evidence.onset_ns[top, FAULTS.index(causes[0].fault)])
            onset = onset_ns if onset_ns >= 0 else None
        return Ranking(start_ns, end_ns, self.model_name, (time.perf_counter() - began) * 1e3, causes, onset)

    def causes(self, evidence: NodeEvidence, alert_nodes: Sequence[str]) -> tuple[Cause, ...]:
        """Every candidate, most probable first, from already extracted evidence."""
        if not evidence.nodes:
            return ()
        structure = evidence_structure(evidence, alert_nodes)
        posterior = np.exp(log_posterior(evidence.score, structure, self._active_params()))
        rows, dominant, merged = _reported(evidence, structure.candidates, posterior)
        node_p = merged.sum(axis=1)
        node_p = node_p / node_p.sum()
        fault = merged.argmax(axis=1)
        order = np.argsort(-node_p, kind="stable")
        shown_rows = dominant[order].tolist()
        names, services = evidence.nodes, evidence.services
        return tuple(
            Cause(
                rank=rank,
                node=names[row],
                service=services[row],
                fault=FAULTS[k],
                probability=p,
                evidence=shown,
                path=(names[row], *(names[i] for i in path[1:])),
            )
            for rank, (row, k, p, shown, path) in enumerate(
                zip(
                    rows[order].tolist(),
                    fault[order].tolist(),
                    node_p[order].tolist(),
                    _evidence(evidence, shown_rows),
                    structure.paths(shown_rows),
                    strict=True,
                ),
                start=1,
            )
        )


def _reported(
    evidence: NodeEvidence, candidates: npt.NDArray[np.int64], posterior: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """A network node is reported as its callee: (reported rows, the candidate row whose evidence
    and path each shows, the posterior summed per reported row)."""
    network = evidence.network[candidates]
    if not network.any():
        return candidates, candidates, posterior
    owner = evidence.owner[candidates]
    report = np.where(network & np.isin(owner, candidates), owner, candidates)
    rows, group = np.unique(report, return_inverse=True)
    merged = np.zeros((rows.shape[0], posterior.shape[1]))
    np.add.at(merged, group, posterior)
    by_mass = np.lexsort((-posterior.sum(axis=1), group))  # per group, most probable first
    first = by_mass[np.r_[True, group[by_mass][1:] != group[by_mass][:-1]]]
    return rows, candidates[first], merged


def simultaneous_roots(
    evidence: NodeEvidence, alert_nodes: Sequence[str], params: HealthParams, *, steps: int = 300, seed: int = 0
) -> list[tuple[str, float]]:
    """Several root causes at once (SVI, `models.enumeration.multi_root_model`): every candidate
    with its inferred fault intensity, strongest first."""
    import torch  # the SVI model is Pyro's: torch loads only when it is asked for

    from models.enumeration import fit_multi_root

    structure = evidence_structure(evidence, alert_nodes)
    score, mask = observed(evidence.score[structure.candidates])
    below = torch.from_numpy(structure.relation.T == Relation.ANCESTOR)  # below[i, j]: i calls j
    tensors = torch.from_numpy(score), torch.from_numpy(mask)
    intensity = fit_multi_root(*tensors, below, params, steps=steps, seed=seed).tolist()
    ranked = sorted(zip(structure.candidates.tolist(), intensity, strict=True), key=lambda pair: -pair[1])
    strongest: dict[str, float] = {}  # a network node is reported as its callee
    for row, value in ranked:
        strongest.setdefault(evidence.services[row] if evidence.network[row] else evidence.nodes[row], value)
    return list(strongest.items())


def _evidence(evidence: NodeEvidence, rows: list[int]) -> list[tuple[Evidence, ...]]:
    """The strongest measured signals of each row, strongest first (finite values only: JSON has
    no NaN). Selected as arrays, then made into objects in one pass (every candidate has some)."""
    score, observed, baseline = evidence.score[rows], evidence.observed[rows], evidence.baseline[rows]
    shown = np.isfinite(score) & np.isfinite(observed) & np.isfinite(baseline)
    order = np.argsort(np.where(shown, -score, np.inf), axis=1, kind="stable")[:, :EVIDENCE_PER_CAUSE]
    at, column = np.nonzero(np.take_along_axis(shown, order, axis=1))
    column = order[at, column]
    signals = evidence.signal
    names = [signals[row][j] for row, j in zip(np.asarray(rows)[at].tolist(), column.tolist(), strict=True)]
    made = list(
        map(Evidence, names, observed[at, column].tolist(), baseline[at, column].tolist(), score[at, column].tolist())
    )
    ends = np.cumsum(np.bincount(at, minlength=len(rows))).tolist()
    return [tuple(made[start:end]) for start, end in zip([0, *ends[:-1]], ends, strict=True)]
