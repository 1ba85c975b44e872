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
import torch

from models.health import HealthParams, log_mixture_ratio
from models.structure import CausalStructure


def observed(score: npt.NDArray[np.float64]) -> tuple[torch.Tensor, torch.Tensor]:
    """Scores as a tensor with NaN (unmeasurable) replaced by 0, and the mask of measured ones."""
    s = torch.from_numpy(np.ascontiguousarray(score, np.float64))
    mask = ~torch.isnan(s)
    return torch.nan_to_num(s), mask


def log_prior(valid: torch.Tensor) -> torch.Tensor:
    """Uniform over candidate nodes, then uniform over the classes measurable at each; (R, C)."""
    per_node = valid.sum(-1, keepdim=True).clamp(min=1)
    return torch.where(valid, -torch.log(per_node), torch.tensor(-torch.inf, dtype=torch.float64))


def log_posterior(score: npt.NDArray[np.float64], structure: CausalStructure, params: HealthParams) -> torch.Tensor:
    """Normalised log posterior, shape (candidates, classes); -inf where a class can't be measured."""
    s, mask = observed(score)
    cand = torch.from_numpy(structure.candidates)
    root_s, root_mask = s[cand], mask[cand]
    activation = params.tensor("activation")  # (C, F)
    root = (log_mixture_ratio(root_s[:, None, :], activation[None, :, :], params) * root_mask[:, None, :]).sum(-1)
    weights, locs = params.tensor("relation_weight"), params.tensor("relation_loc")  # (relations, F)
    relation = torch.from_numpy(structure.relation).to(torch.int64)
    likelihood = root.clone()
    for k in range(1, weights.shape[0]):
        affected = (log_mixture_ratio(root_s, weights[k], params, locs[k]) * root_mask).sum(-1)  # (R,)
        likelihood += ((relation == k).to(torch.float64) @ affected)[:, None]
    logits = likelihood / params.temperature + log_prior(root_mask)
    return logits - torch.logsumexp(logits.reshape(-1), 0)
