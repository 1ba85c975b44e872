"""The exact posterior over (root cause, fault class), vectorised: the served form of the model.

Enumerating one root r with class c: r's own scores follow the class's activations, the nodes
related to r follow their relation's weights, every other node is healthy; r's lockstep group
(`models.health.LOCKSTEP_RELATIONS`) does so only if r's fault stalls it, which is summed out
(`models.health.stalled`). Relative to "all healthy", the log joint is the root's mixture ratios
plus its related nodes' ones (its group's as one term), so the whole table is one batched density
evaluation and a sum over the related pairs: O(candidates x nodes) to find them, O(pairs) to add
them.
`models.enumeration` states the same model in Pyro and the tests check the two agree;
`models.learning` fits the parameters through these same functions (on torch tensors, `xp`).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit
from scipy.special import logsumexp

from models.health import (
    LOCKSTEP_RELATIONS,
    HealthParams,
    ParamArrays,
    log_mixture_ratio,
    log_prior,
    root_scores,
    stalled,
)
from models.structure import CausalStructure, Relation

Array = npt.NDArray[np.float64]


def observed(score: Array) -> tuple[Array, npt.NDArray[np.bool_]]:
    """Scores with NaN (unmeasurable) replaced by 0, and the mask of measured ones."""
    return np.nan_to_num(score), ~np.isnan(score)


def root_terms(score: Any, params: ParamArrays, xp: ModuleType = np, *, capped: bool = True) -> Any:
    """(R, C, F): what each score adds over health to its node as a root of each class; scores
    read at most `fault_peak` (`capped`, as the posterior reads them) or as they are (their density)."""
    read = root_scores(score, params, xp) if capped else score
    activation = params.array("activation", xp)  # (C, F)
    return log_mixture_ratio(read[:, None, :], activation[None, :, :], params, xp=xp)


def related_terms(score: Any, params: ParamArrays, xp: ModuleType = np) -> Any:
    """(R, relations, F): what each score adds over health in each relation to a root (0 for NONE)."""
    weights, locs = params.array("relation_weight", xp), params.array("relation_loc", xp)  # (relations, F)
    return log_mixture_ratio(score[:, None, :], weights[None], params, locs[None], xp)


def root_log_ratio(score: Any, mask: Any, params: ParamArrays, xp: ModuleType = np, *, capped: bool = True) -> Any:
    """(R, C): `root_terms` summed over the measured scores."""
    return (root_terms(score, params, xp, capped=capped) * mask[:, None, :]).sum(-1)


def related_ratio(score: Any, mask: Any, params: ParamArrays, xp: ModuleType = np) -> Any:
    """(R, relations): `related_terms` summed over the measured scores."""
    return (related_terms(score, params, xp) * mask[:, None, :]).sum(-1)


def distinct_columns(score: Array) -> tuple[Array, npt.NDArray[np.intp]]:
    """Each column's distinct values as one (U, F) table (a shorter column padded with its
    largest value) and where each score sits in its column: `score == np.take_along_axis(values,
    at, axis=0)`. Terms evaluated once per value: most scores of a large graph are 0."""
    if score.shape[0] == 0:
        return np.zeros((1, score.shape[1])), np.zeros(score.shape, np.intp)
    order = np.argsort(score, axis=0, kind="stable")
    ordered = np.take_along_axis(score, order, axis=0)
    step = np.zeros(score.shape, np.intp)
    step[1:] = ordered[1:] != ordered[:-1]
    position = np.cumsum(step, axis=0)
    at = np.empty_like(position)
    np.put_along_axis(at, order, position, axis=0)
    values = np.empty((int(position[-1].max()) + 1, score.shape[1]))
    values[:] = ordered[-1]
    np.put_along_axis(values, position, ordered, axis=0)
    return values, at


@njit(cache=True, nogil=True)
def _summed(terms: Array, at: npt.NDArray[np.intp], mask: npt.NDArray[np.bool_]) -> Array:
    """(R, K): per-value terms (U, K, F) of `distinct_columns` summed over each node's measured
    scores, in one pass without the (R, K, F) gather."""
    rows, signals = at.shape
    summed = np.zeros((rows, terms.shape[1]))
    for r in range(rows):
        for f in range(signals):
            if mask[r, f]:
                for k in range(terms.shape[1]):
                    summed[r, k] += terms[at[r, f], k, f]
    return summed


IN_LOCKSTEP = np.isin(np.arange(len(Relation)), [int(r) for r in LOCKSTEP_RELATIONS])  # per relation code


@njit(cache=True, nogil=True)
def _summed_per_root(
    related: npt.NDArray[np.int64], relation: npt.NDArray[np.int8], ratio: Array, in_lockstep: npt.NDArray[np.bool_]
) -> Array:
    """(2, R): per root, the `ratio[node, relation]` of its related nodes (`CausalStructure.related`:
    flat positions root * R + node of the relation matrix), those outside its lockstep group (row
    0) and those in it (row 1)."""
    n = ratio.shape[0]
    flat = relation.ravel()
    sums = np.zeros((2, n))
    for position in related:
        kind = flat[position]
        sums[int(in_lockstep[kind]), position // n] += ratio[position % n, kind]
    return sums


def cause_logits(root: Any, apart: Any, lockstep: Any, mask: Any, params: ParamArrays, xp: ModuleType = np) -> Any:
    """(R, C) unnormalised log posterior from the roots' own terms (R, C) and their related nodes'
    outside and in their lockstep groups (R,): the likelihood tempered by `temperature`, the
    priors (the cause's, a group's stall) not."""
    temperature = params.array("temperature", xp)
    likelihood = (root + apart[:, None]) / temperature + stalled(lockstep / temperature, params, xp)
    return likelihood + log_prior(mask, params, xp)


def _related_sums(
    values: Array,
    at: npt.NDArray[np.intp],
    mask: npt.NDArray[np.bool_],
    structure: CausalStructure,
    params: HealthParams,
) -> tuple[Array, Array]:
    """Per candidate as a root, its related nodes' terms summed outside its lockstep group and in it."""
    ratio = _summed(related_terms(values, params), at, mask)
    apart, lockstep = _summed_per_root(structure.related, structure.relation, ratio, IN_LOCKSTEP)
    return apart, lockstep


def lockstep_sums(score: Array, structure: CausalStructure, params: HealthParams) -> Array:
    """(R,): per candidate as a root, its lockstep group's terms summed (untempered); `score` is
    the candidates' (R, F)."""
    s, mask = observed(score)
    return _related_sums(*distinct_columns(s), mask, structure, params)[1]


def log_posterior_and_lockstep(score: Array, structure: CausalStructure, params: HealthParams) -> tuple[Array, Array]:
    """`log_posterior`, and `lockstep_sums` with it."""
    s, mask = observed(score[structure.candidates])
    values, at = distinct_columns(s)
    apart, lockstep = _related_sums(values, at, mask, structure, params)
    with np.errstate(invalid="ignore"):
        logits: Array = cause_logits(_summed(root_terms(values, params), at, mask), apart, lockstep, mask, params)
    return logits - float(logsumexp(logits)), lockstep


def log_posterior(score: Array, structure: CausalStructure, params: HealthParams) -> Array:
    """Normalised log posterior, shape (candidates, classes); -inf where a class can't be measured."""
    return log_posterior_and_lockstep(score, structure, params)[0]
