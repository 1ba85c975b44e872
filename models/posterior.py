"""The exact posterior over (root cause, fault class), vectorised: the served form of the model.

Enumerating one root r with class c: r's own scores follow the class's activations, the nodes
related to r follow their relation's weights, every other node is healthy. Relative to "all
healthy", the log joint is the root's mixture ratios plus its related nodes' ones, so the whole
table is one batched density evaluation and one sparse product: O(candidates x related pairs).
`models.enumeration` states the same model in Pyro and the tests check the two agree;
`models.learning` fits the parameters through these same functions (on torch tensors, `xp`).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from scipy.special import logsumexp

from models.health import HealthParams, ParamArrays, log_mixture_ratio, log_prior, root_scores
from models.structure import CausalStructure, Relation

Array = npt.NDArray[np.float64]
Index = npt.NDArray[np.int64]


def observed(score: Array) -> tuple[Array, npt.NDArray[np.bool_]]:
    """Scores with NaN (unmeasurable) replaced by 0, and the mask of measured ones."""
    return np.nan_to_num(score), ~np.isnan(score)


def related_pairs(relation: npt.NDArray[np.integer[Any]]) -> tuple[Index, Index]:
    """The nonzero entries of the (R, R * relations) operator that sums, for each root r, what
    its related nodes add: row r, column i * relations + `relation[r, i]` (NONE adds nothing)."""
    rows, nodes = np.nonzero(relation != Relation.NONE)
    return rows.astype(np.int64), nodes.astype(np.int64) * len(Relation) + relation[rows, nodes]


def root_log_ratio(score: Any, mask: Any, params: ParamArrays, xp: ModuleType = np, *, capped: bool = True) -> Any:
    """(R, C): what each node adds over health as a root of each class; its scores read at most
    `fault_peak` (`capped`, as the posterior reads them) or as they are (their density)."""
    read = root_scores(score, params, xp) if capped else score
    activation = params.array("activation", xp)  # (C, F)
    return (log_mixture_ratio(read[:, None, :], activation[None, :, :], params, xp=xp) * mask[:, None, :]).sum(-1)


def related_log_ratio(score: Any, mask: Any, related: Any, params: ParamArrays, xp: ModuleType = np) -> Any:
    """(R,): what the nodes related to each root add over health; `related` is the operator of
    `related_pairs` (scipy sparse for numpy, torch sparse for torch)."""
    weights, locs = params.array("relation_weight", xp), params.array("relation_loc", xp)  # (relations, F)
    ratio = log_mixture_ratio(score[:, None, :], weights[None], params, locs[None], xp) * mask[:, None, :]
    return (related @ ratio.sum(-1).reshape(-1, 1))[:, 0]


def cause_logits(root: Any, related: Any, mask: Any, params: ParamArrays, xp: ModuleType = np) -> Any:
    """(R, C) unnormalised log posterior: the prior and the likelihood tempered by `temperature`."""
    return (root + related[:, None]) / params.array("temperature", xp) + log_prior(mask, xp)


def log_posterior(score: Array, structure: CausalStructure, params: HealthParams) -> Array:
    """Normalised log posterior, shape (candidates, classes); -inf where a class can't be measured."""
    s, mask = observed(score[structure.candidates])
    n = s.shape[0]
    rows, columns = related_pairs(structure.relation)
    related = sp.csr_matrix((np.ones(rows.shape[0]), (rows, columns)), shape=(n, n * len(Relation)))
    root = root_log_ratio(s, mask, params)
    with np.errstate(invalid="ignore"):
        logits: Array = cause_logits(root, related_log_ratio(s, mask, related, params), mask, params)
    return logits - float(logsumexp(logits))
