"""The health model's parameters learned with Pyro: hierarchical priors, MAP by SVI.

Priors share strength across groups, so a class or relation with few cases borrows from the
others: the classes' faulty locations are drawn around one mean; the activations' logits around a
diagonal mean (a class's own signal) and an off-diagonal one; the relation weights' logits around
a mean per relation, themselves around a shared one; each relation's locations around the faulty
locations, shifted per relation either way (a rank waiting in a collective can show more than its
slow peer); the classes' stall rates (how often a root's fault stalls its lockstep group) around
one mean. Groups are non-centred (value = mean + spread * offset, offset ~ N(0, 1)), which keeps
MAP well posed while the spreads are learned too. An activation no case measured (no root of its
class read its signal) stays at its group's mean: nothing else may set it. Scales and tails have
weakly-informative priors above a floor: scores are clipped at 0, and a signal that is always 0
would otherwise get a healthy density of no width.

The objective is the complete-data likelihood of every case's scores given its true (root,
class), which learns the densities, activations and relation weights, plus the log probability of
the true root under the tempered posterior (`models.posterior`'s own functions), which learns the
temperature with the rest (`models.fitting.calibrated` then sets it so that the top probability
matches the top-1 accuracy). `health_model` takes tensors
(`CaseBatch`), `health_guide` is `AutoDelta` (MAP) started at given parameters, and `learn` runs a
fixed, seeded number of ClippedAdam steps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt
import pyro
import pyro.distributions as dist
import scipy.sparse as sp
import torch
from pyro.distributions import TorchDistribution
from pyro.infer import SVI, Trace_ELBO
from pyro.infer.autoguide import AutoDelta, init_to_value
from pyro.optim import ClippedAdam

from models.health import LOCKSTEP_RELATIONS, HealthParams, log_healthy, stalled
from models.posterior import cause_logits, observed, related_ratio, root_log_ratio
from models.structure import Relation
from rca.evidence.nodes import N_FAULTS

HEALTHY_SCALE_MIN, TAIL_MEAN_MIN, FAULT_SCALE_MIN = 0.5, 0.5, 0.3
Labelled = tuple[npt.NDArray[np.float64], npt.NDArray[np.integer[Any]], int, int]  # scores, relation, root, class
Sites = dict[str, torch.Tensor]


@dataclass(frozen=True, slots=True)
class CaseBatch:
    """Labelled cases as tensors: every case's candidates stacked (those with a measured score)."""

    score: torch.Tensor  # (N, F), unmeasured as 0
    mask: torch.Tensor  # (N, F) measured
    case: torch.Tensor  # (N,) the case of each row
    related: torch.Tensor  # sparse (N, N * relations): sums what each root's related nodes add (but its group)
    lockstep: torch.Tensor  # sparse (N, N * relations): sums what each root's lockstep group adds
    root: torch.Tensor  # (B,) row of each case's true root
    fault: torch.Tensor  # (B,) its class

    def seen(self) -> torch.Tensor:
        """(C, F): whether some case of class c measured signal f at its root. Where none did, the
        cases say nothing of that activation, and it stays at its group's mean."""
        measured = self.mask[self.root].to(torch.float64)
        return torch.zeros(N_FAULTS, self.score.shape[1], dtype=torch.float64).index_add(0, self.fault, measured) > 0


def case_batch(cases: Sequence[Labelled]) -> CaseBatch:
    """Stacks (candidates' scores with NaN, relation matrix, true root's position, true class)
    cases. Candidates with no measured score are left out (no class of theirs has mass), and so is
    a case whose root is one."""
    scores, masks, rows, columns, roots, faults = [], [], [], [], [], []
    offset = 0
    for score, relation, root, fault in cases:
        n = score.shape[0]
        if relation.shape != (n, n) or not (0 <= root < n and 0 <= fault < N_FAULTS):
            raise ValueError(f"a case needs an (R, R) relation, a root in [0, R) and a class in [0, C): R={n}")
        s, mask = observed(score)
        kept = np.flatnonzero(mask.any(axis=1))
        if not mask[root].any():
            continue
        pairs = sp.coo_matrix(relation[np.ix_(kept, kept)])  # row r, column i * relations + kind
        r, c = pairs.row.astype(np.int64), pairs.col.astype(np.int64) * len(Relation) + pairs.data
        scores.append(s[kept])
        masks.append(mask[kept])
        rows.append(r + offset)
        columns.append(c + offset * len(Relation))
        roots.append(offset + int(np.searchsorted(kept, root)))
        faults.append(fault)
        offset += kept.shape[0]
    if not roots:
        raise ValueError("no case has a measured score at its true root")
    pairs = np.stack([np.concatenate(rows), np.concatenate(columns)])
    in_group = np.isin(pairs[1] % len(Relation), [int(r) for r in LOCKSTEP_RELATIONS])
    apart, lockstep = (_summing(pairs[:, in_group == g], offset) for g in (False, True))
    sizes = [m.shape[0] for m in masks]
    return CaseBatch(
        torch.from_numpy(np.concatenate(scores)),
        torch.from_numpy(np.concatenate(masks)),
        torch.from_numpy(np.repeat(np.arange(len(sizes)), sizes)),
        apart,
        lockstep,
        torch.tensor(roots),
        torch.tensor(faults),
    )


def _summing(pairs: npt.NDArray[np.int64], n_rows: int) -> torch.Tensor:
    """A sparse (N, N * relations) 0/1 matrix with ones at `pairs` (2, P)."""
    ones = torch.ones(pairs.shape[1], dtype=torch.float64)
    shape = (n_rows, n_rows * len(Relation))
    return torch.sparse_coo_tensor(torch.from_numpy(pairs), ones, shape, check_invariants=True).coalesce()


@dataclass(frozen=True, slots=True)
class TensorParams:
    """`HealthParams`' fields as tensors, read by the densities as `HealthParams` are."""

    healthy_scale: torch.Tensor
    tail_weight: torch.Tensor
    tail_mean: torch.Tensor
    fault_loc: torch.Tensor
    fault_scale: torch.Tensor
    activation: torch.Tensor
    relation_weight: torch.Tensor
    relation_loc: torch.Tensor
    temperature: torch.Tensor
    class_rate: torch.Tensor
    stall_rate: torch.Tensor

    def array(self, name: str, xp: ModuleType = torch) -> Any:
        return getattr(self, name)

    def frozen(self) -> HealthParams:
        def rows(t: torch.Tensor) -> tuple[tuple[float, ...], ...]:
            return tuple(tuple(row) for row in t.tolist())

        return HealthParams(
            healthy_scale=tuple(self.healthy_scale.tolist()),
            tail_weight=tuple(self.tail_weight.tolist()),
            tail_mean=tuple(self.tail_mean.tolist()),
            fault_loc=tuple(self.fault_loc.tolist()),
            fault_scale=tuple(self.fault_scale.tolist()),
            activation=rows(self.activation),
            relation_weight=rows(self.relation_weight),
            relation_loc=rows(self.relation_loc),
            temperature=float(self.temperature),
            class_rate=tuple(self.class_rate.tolist()),
            stall_rate=tuple(self.stall_rate.tolist()),
        )


def _logit(p: float) -> float:
    return math.log(p / (1.0 - p))


def _iid(prior: TorchDistribution, *shape: int) -> TorchDistribution:
    iid: TorchDistribution = prior.expand(list(shape)).to_event(len(shape))  # type: ignore[no-untyped-call]
    return iid


def _t(value: float | list[float]) -> torch.Tensor:
    return torch.tensor(value, dtype=torch.float64)


def priors(n_classes: int, n_signals: int, n_relations: int) -> dict[str, TorchDistribution]:
    """The model's latent sites, for C classes, F signals (the classes' own first) and the relations."""
    c, f, k = n_classes, n_signals, n_relations - 1  # NONE drives nothing: no parameters
    return {
        "healthy_scale_excess": _iid(dist.Gamma(_t(1.5), _t(1.0)), f),  # above the floor: mode 0.5
        "tail_weight": _iid(dist.Beta(_t(2.0), _t(50.0)), f),
        "tail_mean_excess": _iid(dist.Gamma(_t(2.0), _t(0.4)), f),
        "fault_scale_excess": _iid(dist.Gamma(_t(2.0), _t(2.0)), f),
        "fault_loc_mean": dist.Normal(_t(math.log(10.0)), _t(1.0)),
        "fault_loc_spread": dist.HalfNormal(_t(1.0)),
        "fault_loc_offset": _iid(dist.Normal(_t(0.0), _t(1.0)), f),
        "activation_mean": _iid(dist.Normal(_t([_logit(0.02), _logit(0.9)]), _t(2.0)), 2),  # off, on diagonal
        "activation_spread": _iid(dist.HalfNormal(_t(2.0)), 2),
        "activation_offset": _iid(dist.Normal(_t(0.0), _t(1.0)), c, f),
        "relation_weight_mean": dist.Normal(_t(_logit(0.05)), _t(2.0)),
        "relation_weight_spread": _iid(dist.HalfNormal(_t(2.0)), 2),  # between relations, within one
        "relation_weight_relation": _iid(dist.Normal(_t(0.0), _t(1.0)), k),
        "relation_weight_offset": _iid(dist.Normal(_t(0.0), _t(1.0)), k, f),
        # a related node's location: the root's, shifted per relation about a shift they share
        "relation_loc_mean": dist.Normal(_t(0.0), _t(1.0)),
        "relation_loc_spread": _iid(dist.HalfNormal(_t(1.0)), 2),  # between relations, within one
        "relation_loc_relation": _iid(dist.Normal(_t(0.0), _t(1.0)), k),
        "relation_loc_offset": _iid(dist.Normal(_t(0.0), _t(1.0)), k, f),
        "temperature": dist.LogNormal(_t(0.0), _t(1.0)),  # type: ignore[no-untyped-call]
        "class_rate_log": _iid(dist.Normal(_t(0.0), _t(1.0)), c),  # relative rates: the prior pins their scale
        "stall_rate_mean": dist.Normal(_t(_logit(0.8)), _t(1.5)),
        "stall_rate_spread": dist.HalfNormal(_t(1.0)),
        "stall_rate_offset": _iid(dist.Normal(_t(0.0), _t(1.0)), c),
    }


def compose(sites: Sites, seen: torch.Tensor | None = None) -> TensorParams:
    """The parameters the sites stand for (a group's values: mean + spread * offset); activations
    no case has `seen` (`CaseBatch.seen`) at their group's mean."""
    fault_loc = sites["fault_loc_mean"] + sites["fault_loc_spread"] * sites["fault_loc_offset"]
    on_diagonal = torch.eye(*sites["activation_offset"].shape, dtype=torch.int64)  # (C, F): a class's own signal
    offset = sites["activation_offset"] * (1.0 if seen is None else seen)
    activation = sites["activation_mean"][on_diagonal] + sites["activation_spread"][on_diagonal] * offset

    def per_relation(name: str) -> torch.Tensor:  # (relations, F): mean + spreads between and within
        between, within = sites[f"{name}_spread"]
        relation = sites[f"{name}_mean"] + between * sites[f"{name}_relation"]
        grouped: torch.Tensor = relation[:, None] + within * sites[f"{name}_offset"]
        return grouped

    weight = torch.sigmoid(per_relation("relation_weight"))
    shift = per_relation("relation_loc")
    return TensorParams(
        healthy_scale=HEALTHY_SCALE_MIN + sites["healthy_scale_excess"],
        tail_weight=sites["tail_weight"],
        tail_mean=TAIL_MEAN_MIN + sites["tail_mean_excess"],
        fault_loc=fault_loc,
        fault_scale=FAULT_SCALE_MIN + sites["fault_scale_excess"],
        activation=torch.sigmoid(activation),
        relation_weight=torch.cat([torch.zeros_like(weight[:1]), weight]),  # NONE drives nothing
        relation_loc=torch.cat([fault_loc[None], fault_loc + shift]),  # NONE's row is never read
        temperature=sites["temperature"],
        class_rate=torch.exp(sites["class_rate_log"]),
        stall_rate=torch.sigmoid(sites["stall_rate_mean"] + sites["stall_rate_spread"] * sites["stall_rate_offset"]),
    )


def initial_sites(params: HealthParams) -> Sites:
    """Sites `compose` maps to `params` (scales and tails within their floors), spreads at 1."""
    loc, relation_loc = params.array("fault_loc", torch), params.array("relation_loc", torch)[1:]
    activation = torch.logit(params.array("activation", torch), eps=1e-3)
    on_diagonal = torch.eye(*activation.shape, dtype=torch.bool)
    activation_mean = torch.stack([activation[~on_diagonal].mean(), activation[on_diagonal].mean()])
    weight = torch.logit(params.array("relation_weight", torch)[1:], eps=1e-3)
    per_relation = weight.mean(1)
    shift = (relation_loc - loc).mean(1)
    stall = torch.logit(params.array("stall_rate", torch), eps=1e-3)

    def excess(name: str, floor: float) -> torch.Tensor:
        return torch.clamp(params.array(name, torch) - floor, min=1e-3)

    return {
        "healthy_scale_excess": excess("healthy_scale", HEALTHY_SCALE_MIN),
        "tail_weight": params.array("tail_weight", torch),
        "tail_mean_excess": excess("tail_mean", TAIL_MEAN_MIN),
        "fault_scale_excess": excess("fault_scale", FAULT_SCALE_MIN),
        "fault_loc_mean": loc.mean(),
        "fault_loc_spread": _t(1.0),
        "fault_loc_offset": loc - loc.mean(),
        "activation_mean": activation_mean,
        "activation_spread": _t([1.0, 1.0]),
        "activation_offset": activation - activation_mean[on_diagonal.long()],
        "relation_weight_mean": per_relation.mean(),
        "relation_weight_spread": _t([1.0, 1.0]),
        "relation_weight_relation": per_relation - per_relation.mean(),
        "relation_weight_offset": weight - per_relation[:, None],
        "relation_loc_mean": shift.mean(),
        "relation_loc_spread": _t([1.0, 1.0]),
        "relation_loc_relation": shift - shift.mean(),
        "relation_loc_offset": relation_loc - loc - shift[:, None],
        "temperature": params.array("temperature", torch),
        "class_rate_log": torch.log(params.array("class_rate", torch)),
        "stall_rate_mean": stall.mean(),
        "stall_rate_spread": _t(1.0),
        "stall_rate_offset": stall - stall.mean(),
    }


def health_model(batch: CaseBatch) -> None:
    """Hierarchical priors over the parameters; the cases' scores given their truth, and the
    truth given the scores under the tempered posterior."""
    n_rows, n_signals = batch.score.shape
    sites = priors(N_FAULTS, n_signals, batch.related.shape[1] // n_rows)
    params = compose({name: pyro.sample(name, prior) for name, prior in sites.items()}, batch.seen())
    score, mask = batch.score, batch.mask
    ratio = related_ratio(score, mask, params, torch).reshape(-1, 1)
    apart, lockstep = ((summing @ ratio)[:, 0] for summing in (batch.related, batch.lockstep))  # (N,) each
    own = root_log_ratio(score[batch.root], mask[batch.root], params, torch, capped=False)  # (B, C)
    cases = torch.arange(batch.root.shape[0])
    healthy = (log_healthy(score, params, torch) * mask).sum()
    group = stalled(lockstep[batch.root], params, torch)[cases, batch.fault]  # the stall summed out
    pyro.factor("scores", healthy + own[cases, batch.fault].sum() + apart[batch.root].sum() + group.sum())
    logits = cause_logits(root_log_ratio(score, mask, params, torch), apart, lockstep, mask, params, torch)
    node = torch.logsumexp(logits, -1)
    pyro.factor("truth", (node[batch.root] - _segment_logsumexp(node, batch.case, cases.shape[0])).sum())


def _segment_logsumexp(values: torch.Tensor, segment: torch.Tensor, n: int) -> torch.Tensor:
    top = torch.full((n,), -math.inf, dtype=values.dtype).scatter_reduce(0, segment, values.detach(), "amax")
    total = torch.zeros(n, dtype=values.dtype).index_add(0, segment, torch.exp(values - top[segment]))
    return top + torch.log(total)


def health_guide(initial: HealthParams) -> AutoDelta:
    """MAP: a point at every latent site, started at `initial`."""
    return AutoDelta(health_model, init_loc_fn=init_to_value(values=initial_sites(initial)))  # type: ignore[no-untyped-call]


def learn(batch: CaseBatch, initial: HealthParams, *, steps: int, lr: float = 0.1, seed: int = 0) -> HealthParams:
    """The MAP parameters after `steps` ClippedAdam steps from `initial` (learning rate decaying to
    a tenth); the same seed and cases give the same parameters."""
    pyro.set_rng_seed(seed)
    pyro.clear_param_store()
    guide = health_guide(initial)
    optimiser = ClippedAdam({"lr": lr, "lrd": 0.1 ** (1.0 / steps)})
    svi = SVI(health_model, guide, optimiser, Trace_ELBO())  # type: ignore[no-untyped-call]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # sums in one order whatever the cores (and no spinning on a busy machine)
    try:
        for _ in range(steps):
            svi.step(batch)  # type: ignore[no-untyped-call]
    finally:
        torch.set_num_threads(threads)
    with torch.no_grad():
        return compose(guide.median(batch), batch.seen()).frozen()  # type: ignore[no-untyped-call]
