"""The exact posterior over (root cause, fault class), vectorised.

Enumerating one root r with class c: r's own scores follow the class's activations, its
ancestors' scores follow the propagation probabilities, every other node is healthy. Relative to
"all healthy", the log joint is the root's mixture ratios plus its ancestors' ones, so the whole
table is one batched density evaluation and a matrix-vector product: O(candidates x nodes).
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
    propagated = (log_mixture_ratio(s, params.tensor("propagation"), params) * mask).sum(-1)  # (N,)
    ancestors = torch.from_numpy(structure.ancestors).to(torch.float64)
    likelihood = root + (ancestors @ propagated)[:, None]
    logits = likelihood / params.temperature + log_prior(root_mask)
    return logits - torch.logsumexp(logits.reshape(-1), 0)
