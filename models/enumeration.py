"""The health model stated in Pyro: exact enumeration of one root, and SVI for several.

`single_root_model` samples the (root, fault class) pair and scores every node's evidence under
the state it puts the node in; `TraceEnum_ELBO.compute_marginals` then gives the exact posterior,
which `models.posterior` computes in closed form (the tests check they agree).

`multi_root_model` lets any set of nodes be faulty: each node's fault intensity `u_i` has a sparse
Beta prior, a node's signal is driven with weight `1 - (1 - a u_i) prod_{j below i} (1 - rho u_j)`
(its own fault or a fault it calls into, noisy-OR), and `fit_multi_root` infers the intensities
with SVI (mean-field guide on the logit scale). Models take tensors and never load data.
"""

from __future__ import annotations

import pyro
import pyro.distributions as dist
import torch
from pyro.infer import SVI, Trace_ELBO, TraceEnum_ELBO
from pyro.infer.autoguide import AutoNormal
from pyro.optim import Adam  # type: ignore[attr-defined]

from models.health import HealthParams, log_healthy, log_mixture_ratio, log_prior, root_scores
from models.structure import Relation


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
    n_nodes, n_faults = score.shape
    prior = log_prior(mask, torch).reshape(-1)
    cause = pyro.sample("cause", dist.Categorical(logits=prior), infer={"enumerate": "parallel"})
    k = cause.reshape(-1, 1, 1)
    root, fault = k // n_faults, k % n_faults  # (K, 1, 1): a candidate position and a class
    node = torch.arange(n_nodes).reshape(1, -1, 1)
    activation = params.array("activation", torch)[fault.reshape(-1)].unsqueeze(1)  # (K, 1, F)
    relation_of = relation[(k // n_faults).reshape(-1)]  # (K, N)
    weight = torch.where(node == root, activation, params.array("relation_weight", torch)[relation_of])  # (K, N, F)
    loc = torch.where(node == root, params.array("fault_loc", torch), params.array("relation_loc", torch)[relation_of])
    with pyro.plate("nodes", n_nodes, dim=-2), pyro.plate("signals", n_faults, dim=-1):
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
    return probs.reshape(candidates.shape[0], score.shape[1])


def multi_root_model(
    score: torch.Tensor, mask: torch.Tensor, below: torch.Tensor, params: HealthParams, sparsity: float
) -> None:
    """score, mask: (N, F); below[i, j]: node j is called (transitively) by node i."""
    n_nodes = score.shape[0]
    with pyro.plate("nodes", n_nodes):
        intensity = pyro.sample("intensity", dist.Beta(torch.tensor(sparsity), torch.tensor(1.0)))
    own = 1.0 - params.array("activation", torch).diagonal() * intensity[:, None]  # (N, F)
    propagation = params.array("relation_weight", torch)[Relation.ANCESTOR]
    spared = torch.exp(below.to(score.dtype) @ torch.log1p(-propagation * intensity[:, None]))
    weight = 1.0 - own * spared
    ratio = log_mixture_ratio(root_scores(score, params, torch), weight, params, xp=torch)
    pyro.factor("evidence", (ratio * mask).sum() / params.temperature)


def fit_multi_root(
    score: torch.Tensor,
    mask: torch.Tensor,
    below: torch.Tensor,
    params: HealthParams,
    *,
    steps: int = 300,
    seed: int = 0,
    sparsity: float = 0.2,
) -> torch.Tensor:
    """Posterior mean fault intensity of every node (several may be faulty at once), by SVI."""
    pyro.set_rng_seed(seed)
    pyro.clear_param_store()
    guide = AutoNormal(multi_root_model)
    svi = SVI(multi_root_model, guide, Adam({"lr": 0.05}), Trace_ELBO(num_particles=4))
    for _ in range(steps):
        svi.step(score, mask, below, params, sparsity)
    median: torch.Tensor = guide.median(score, mask, below, params, sparsity)["intensity"]
    return median.detach()
