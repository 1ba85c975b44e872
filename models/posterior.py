"""The exact posterior over (root cause, fault class), vectorised.

Enumerating one root r with class c: r's own scores follow the class's activations, the nodes
related to r follow their relation's weights, every other node is healthy. Relative to "all
healthy", the log joint is the root's mixture ratios plus its related nodes' ones, so the whole
table is one batched density evaluation and a matrix-vector product per relation:
O(candidates x nodes).
`models.enumeration` states the same model in Pyro and the tests check the two agree.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.special import logsumexp

from models.health import HealthParams, log_mixture_ratio, log_prior, root_scores
from models.structure import CausalStructure

Array = npt.NDArray[np.float64]


def observed(score: Array) -> tuple[Array, npt.NDArray[np.bool_]]:
    """Scores with NaN (unmeasurable) replaced by 0, and the mask of measured ones."""
    return np.nan_to_num(score), ~np.isnan(score)


def log_posterior(score: Array, structure: CausalStructure, params: HealthParams) -> Array:
    """Normalised log posterior, shape (candidates, classes); -inf where a class can't be measured."""
    root_s, root_mask = observed(score[structure.candidates])
    activation = params.array("activation")  # (C, F)
    capped = root_scores(root_s, params)[:, None, :]
    root = (log_mixture_ratio(capped, activation[None, :, :], params) * root_mask[:, None, :]).sum(-1)
    weights, locs = params.array("relation_weight"), params.array("relation_loc")  # (relations, F)
    likelihood = root.copy()
    for k in range(1, weights.shape[0]):
        affected = (log_mixture_ratio(root_s, weights[k], params, locs[k]) * root_mask).sum(-1)  # (R,)
        likelihood += ((structure.relation == k).astype(np.float64) @ affected)[:, None]
    with np.errstate(invalid="ignore"):
        logits: Array = likelihood / params.temperature + log_prior(root_mask)
    return logits - float(logsumexp(logits))
