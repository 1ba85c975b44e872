"""The health model stated in Pyro: exact enumeration of one root, and of two.

`single_root_model` samples the (root, fault class) pair and whether the fault stalls the root's
lockstep group, and scores every node's evidence under the state they put the node in;
`TraceEnum_ELBO.compute_marginals` then gives the exact posterior, which `models.posterior`
computes in closed form (the tests check they agree).

`two_root_model` enumerates two roots over given (node, class) entries and each one's stall, a
node both reach scored under the noisy-OR of their states; `log_evidence` is its exact log
marginal likelihood (and the single root's), which `models.multiroot` computes in closed form to
weigh two roots against one. Models take tensors and never load data.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pyro
import pyro.distributions as dist
import torch
from pyro.infer import TraceEnum_ELBO

from models.health import (
    LOCKSTEP_RELATIONS,
    HealthParams,
    log_faulty,
    log_healthy,
    log_mixture_ratio,
    log_prior,
    root_scores,
)
from models.multiroot import log_pair_ratio, states


def _stall(name: str, classes: torch.Tensor, params: HealthParams) -> torch.Tensor:
    """Whether a root of each of `classes` stalls its lockstep group, enumerated."""
    rate = params.array("stall_rate", torch)[classes]
    return pyro.sample(name, dist.Bernoulli(rate), infer={"enumerate": "parallel"}).bool()


def _unless_stalled(weight: torch.Tensor, relation: torch.Tensor, stall: torch.Tensor) -> torch.Tensor:
    """`weight` (..., N, F) of nodes whose `relation` (..., N) to their root is a lockstep one set
    to 0 where the root's fault does not `stall` its group (broadcast against the nodes)."""
    lockstep = torch.isin(relation, torch.tensor([int(r) for r in LOCKSTEP_RELATIONS]))[..., None]
    return torch.where(lockstep & ~stall, torch.zeros(()), weight)


def single_root_model(
    score: torch.Tensor,
    mask: torch.Tensor,
    candidates: torch.Tensor,
    relation: torch.Tensor,
    params: HealthParams,
) -> None:
    """score, mask: (N, F); candidates: (R,) node rows; relation: (R, R) `Relation` codes between
    candidates. Only candidates are observed: every other node is healthy under every cause."""
    score, mask = score[candidates], mask[candidates]
    n_nodes, n_signals = score.shape
    prior = log_prior(mask, params, torch)  # (N, C): the classes; the scores have `WAIT` too
    n_faults, prior = prior.shape[1], prior.reshape(-1)
    cause = pyro.sample("cause", dist.Categorical(logits=prior), infer={"enumerate": "parallel"})
    k = cause.reshape(-1, 1, 1)
    root, fault = k // n_faults, k % n_faults  # (K, 1, 1): a candidate position and a class
    node = torch.arange(n_nodes).reshape(1, -1, 1)
    activation = params.array("activation", torch)[fault.reshape(-1)].unsqueeze(1)  # (K, 1, F)
    relation_of = relation[(k // n_faults).reshape(-1)]  # (K, N)
    weight = torch.where(node == root, activation, params.array("relation_weight", torch)[relation_of])  # (K, N, F)
    weight = _unless_stalled(weight, relation_of, _stall("stall", fault, params))  # (2, K, N, F)
    loc = torch.where(node == root, params.array("fault_loc", torch), params.array("relation_loc", torch)[relation_of])
    with pyro.plate("nodes", n_nodes, dim=-2), pyro.plate("signals", n_signals, dim=-1):
        healthy = log_healthy(score, params, torch)
        read = torch.where(node == root, root_scores(score, params, torch), score)  # a root's own: capped
        density = healthy + log_mixture_ratio(read, weight, params, loc, torch) / params.temperature
        pyro.factor("evidence", torch.where(mask, density, torch.zeros(())))


def single_root_guide(
    score: torch.Tensor,
    mask: torch.Tensor,
    candidates: torch.Tensor,
    relation: torch.Tensor,
    params: HealthParams,
) -> None:
    """The cause is enumerated exactly: nothing to guide."""


def enumerated_posterior(
    score: torch.Tensor, mask: torch.Tensor, candidates: torch.Tensor, relation: torch.Tensor, params: HealthParams
) -> torch.Tensor:
    """Exact posterior over (candidate, class), shape (R, C), by Pyro's enumeration."""
    elbo = TraceEnum_ELBO(max_plate_nesting=2)
    marginals = elbo.compute_marginals(single_root_model, single_root_guide, score, mask, candidates, relation, params)
    probs: torch.Tensor = marginals["cause"].probs
    return probs.reshape(candidates.shape[0], len(params.class_rate))


def two_root_model(
    score: torch.Tensor,
    mask: torch.Tensor,
    relation: torch.Tensor,
    group: torch.Tensor,
    roots: torch.Tensor,
    classes: torch.Tensor,
    params: HealthParams,
) -> None:
    """score, mask: (R, F) candidates; relation: (R, R); group: (R,) `CausalStructure.group`;
    roots, classes: (K,) the (candidate, class) entries S one root ranges over, the other ranging
    over every entry. A pair's prior is the product of its roots' single-root priors; a pair within
    one group is one root (no two-root term); a pair whose first root lies outside S stands for
    both its orders. Each root stalls its own lockstep group or not (two roots share none)."""
    n_candidates, n_signals = score.shape
    prior = log_prior(mask, params, torch).to(score.dtype)  # (R, C)
    n_faults = prior.shape[1]
    chosen = prior[roots, classes]
    first = pyro.sample("first", dist.Categorical(logits=prior.reshape(-1)), infer={"enumerate": "parallel"})
    second = pyro.sample("second", dist.Categorical(logits=chosen), infer={"enumerate": "parallel"})
    first, second = first[..., 0, 0], second[..., 0, 0]  # (E,) and (K, 1)
    root_1, class_1, root_2, class_2 = first // n_faults, first % n_faults, roots[second], classes[second]
    outside = torch.ones(n_candidates * n_faults, dtype=torch.bool)
    outside[roots * n_faults + classes] = False
    share = torch.logsumexp(chosen, 0) + math.log(2.0) * outside[first]
    pyro.factor("pairs", torch.where(group[root_1] != group[root_2], share, -math.inf)[..., None, None])
    node = torch.arange(n_candidates)
    one = states(score, relation[root_1], node == root_1[..., None], class_1[..., None], params, torch)
    two = states(score, relation[root_2], node == root_2[..., None], class_2[..., None], params, torch)
    lr_1, lr_2 = (log_faulty(r, params, loc, torch) - log_healthy(r, params, torch) for _, loc, r in (one, two))
    stall_1 = _stall("stall_1", class_1[:, None, None], params)  # each root's own stall, at its dims
    stall_2 = _stall("stall_2", class_2[..., None, None], params)
    weight_1 = _unless_stalled(one[0], relation[root_1], stall_1)
    weight_2 = _unless_stalled(two[0], relation[root_2], stall_2)
    with pyro.plate("nodes", n_candidates, dim=-2), pyro.plate("signals", n_signals, dim=-1):
        ratio = log_pair_ratio((weight_1, weight_2), (lr_1, lr_2), torch)
        density = log_healthy(score, params, torch) + ratio / params.temperature
        pyro.factor("evidence", torch.where(mask, density, torch.zeros(())))


def no_guide(*args: object) -> None:
    """Every latent site is enumerated in the model: nothing to guide."""


def two_root_marginals(*args: object) -> tuple[torch.Tensor, torch.Tensor]:
    """`two_root_model`'s exact posterior marginals (args as it takes them): the first root's over
    every (candidate, class), flattened, and the second's over the entries S."""
    marginals = TraceEnum_ELBO(max_plate_nesting=2).compute_marginals(two_root_model, no_guide, *args)
    return marginals["first"].probs, marginals["second"].probs


def log_evidence(model: Callable[..., None], *args: object) -> float:
    """log p(evidence) of a model whose latent sites are all enumerated: its exact ELBO."""
    return -float(TraceEnum_ELBO(max_plate_nesting=2).loss(model, no_guide, *args))
