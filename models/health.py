"""The node health model's parameters and observation densities, shared by every inference.

Each node has one anomaly score per fault class, and one for its wait in collectives
(`rca.evidence.nodes.WAIT`: no class's own signal, what a rank shows when a lockstep peer is
slow, so the root of a stalled communicator is the rank that does not wait). A healthy node's score is
half-normal with a heavy exponential tail (noisy services exist); a faulty signal's score is
log-normal. Scores are clipped at `MAX_SCORE` (`rca.evidence.nodes`), so a score there is censored:
it says only that the statistic reached it, and weighs as both densities' mass beyond it. (Read
as exact, the many clipped scores of a class whose faults are loud would teach a faulty density
pinned just below the clip, and a subtler fault of that class would read as health.) A node in a
given state draws each score from the mixture
`w * faulty + (1 - w) * healthy`, where `w` is the activation of that signal under the root's
fault class for the root itself, the weight of the node's relation to the root for the others
(its callers on the way to the alert, the callees seen only through its client spans, its
siblings, its callees' network nodes, the ranks of its NCCL communicator), and 0 for unrelated
nodes. The lockstep relations (`LOCKSTEP_RELATIONS`: a communicator's ranks, an engine's GPUs) move
as one: a root's fault stalls its group with probability `stall_rate` of its class, and then each
member draws from its relation's mixture; a fault that does not stall it (a slow point-to-point
link) leaves every member healthy. Rank by rank, seven quiet peers of a TP-8 rank would each count
against it; as one group, they are one missing stall.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from scipy import special

from models.structure import Relation
from rca.evidence.nodes import N_COLUMNS, N_FAULTS, WAIT, F
from rca.evidence.rows import MAX_SCORE
from rca.telemetry.faults import Fault

N_RELATIONS = len(Relation)
LOCKSTEP_RELATIONS = (Relation.COLLECTIVE, Relation.LOCKSTEP)  # members that stall together, or not at all
LLM_FAULTS = (
    Fault.GPU_MEMORY_BANDWIDTH,
    Fault.KV_CACHE_FRAGMENTATION,
    Fault.SCHEDULER_PRIORITY_INVERSION,
    Fault.NCCL_COMMUNICATION,
    Fault.NUMA_MISMATCH,
)


def _default_activation() -> list[list[float]]:
    """How often a root of class c (row) shows signal f (column: a class's, then `WAIT`)."""
    a = [[0.02] * N_COLUMNS for _ in range(N_FAULTS)]
    for c in range(N_FAULTS):
        a[c][c] = 0.9
    for fault in LLM_FAULTS:  # GPU, scheduler, NCCL and NUMA trouble slows the node too
        a[F[fault]][F[Fault.LATENCY]] = 0.5
    a[F[Fault.ERRORS]][F[Fault.CALL_STRUCTURE]] = 0.3
    a[F[Fault.CALL_STRUCTURE]][F[Fault.LATENCY]] = 0.2
    a[F[Fault.CALL_STRUCTURE]][F[Fault.ERRORS]] = 0.2
    a[F[Fault.NCCL_COMMUNICATION]][WAIT] = 0.3  # a slow ring slows its own rank's collectives too
    return a


def _default_relations() -> list[list[float]]:
    """How often a node related to the root (`models.structure.Relation`: none, ancestor,
    measured callee, sibling, callee's network, communicator rank, engine GPU, engine) shows signal f
    because of the root's fault."""
    none, ancestor, measured, peer, network, collective, lockstep, engine = (
        [0.0] * N_COLUMNS,
        *([0.01] * N_COLUMNS for _ in range(7)),
    )
    ancestor[F[Fault.LATENCY]], ancestor[F[Fault.ERRORS]], ancestor[F[Fault.CALL_STRUCTURE]] = 0.1, 0.5, 0.3
    measured[F[Fault.LATENCY]], measured[F[Fault.ERRORS]] = 0.3, 0.9
    peer[F[Fault.LATENCY]] = 0.05  # a sibling replica takes the load its faulty twin sheds
    network[F[Fault.LATENCY]] = 0.3  # a starved caller is slow in all its client calls
    collective[WAIT] = 0.8  # lockstep: every rank waits for the slowest
    lockstep[F[Fault.NCCL_COMMUNICATION]] = 0.5  # an engine's GPUs idle, their links slow, with the slowest
    engine[F[Fault.LATENCY]] = 0.5  # an engine's request timings include its GPUs' and workers' time
    return [none, ancestor, measured, peer, network, collective, lockstep, engine]


@dataclass(frozen=True, slots=True)
class HealthParams:
    """Everything the posterior needs besides the evidence; `fit` re-estimates them."""

    # Per evidence column (`rca.evidence.nodes.N_COLUMNS`: a class's, then `WAIT`)
    healthy_scale: tuple[float, ...] = (1.5,) * N_COLUMNS
    tail_weight: tuple[float, ...] = (0.03,) * N_COLUMNS
    tail_mean: tuple[float, ...] = (6.0,) * N_COLUMNS
    fault_loc: tuple[float, ...] = (math.log(10.0),) * N_COLUMNS
    fault_scale: tuple[float, ...] = (0.8,) * N_COLUMNS
    activation: tuple[tuple[float, ...], ...] = field(
        default_factory=lambda: tuple(tuple(row) for row in _default_activation())
    )
    relation_weight: tuple[tuple[float, ...], ...] = field(
        default_factory=lambda: tuple(tuple(row) for row in _default_relations())
    )
    # Where a related node's driven signal sits: effects weaken as they spread, so the node with
    # the strongest signal is the likelier root. Row per relation, like `relation_weight`.
    relation_loc: tuple[tuple[float, ...], ...] = ((math.log(5.0),) * N_COLUMNS,) * N_RELATIONS
    temperature: float = 1.0
    # How often each class is the root's, relative to the others (`log_prior`): a node that can
    # fail in more measurable ways is the likelier root.
    class_rate: tuple[float, ...] = (1.0,) * N_FAULTS
    # How often a root of each class stalls its lockstep group (`LOCKSTEP_RELATIONS`): in (0, 1).
    stall_rate: tuple[float, ...] = (0.9,) * N_FAULTS

    def array(self, name: str, xp: ModuleType = np) -> Any:
        """A parameter as a float64 array of `xp` (numpy, or torch for the Pyro models)."""
        return xp.asarray(getattr(self, name), dtype=xp.float64)


class ParamArrays(Protocol):
    """What the densities read parameters through: `HealthParams`, or the tensors `models.learning`
    is fitting (`name` is a `HealthParams` field)."""

    def array(self, name: str, xp: ModuleType = np) -> Any: ...


# The densities take numpy arrays (the served posterior) or torch tensors (the Pyro models) alike:
# `xp` is the array module, and both spell these operations the same way.


def _log_ndtr(z: Any, xp: ModuleType) -> Any:
    """log of the standard normal CDF, accurate far into the tail."""
    return xp.special.log_ndtr(z) if xp is not np else special.log_ndtr(z)


def _censored(score: Any, density: Any, beyond: Any, xp: ModuleType) -> Any:
    """`density` of scores below `MAX_SCORE`, the log mass `beyond` it for those clipped there."""
    return xp.where(score >= MAX_SCORE, beyond, density)


def log_healthy(score: Any, params: ParamArrays, xp: ModuleType = np) -> Any:
    """log density of scores (..., F) under a healthy node (censored at `MAX_SCORE`)."""
    sigma = params.array("healthy_scale", xp)
    tail, mean = params.array("tail_weight", xp), params.array("tail_mean", xp)
    half_normal = math.log(2.0) - 0.5 * math.log(2 * math.pi) - xp.log(sigma) - 0.5 * (score / sigma) ** 2
    exponential = -xp.log(mean) - score / mean
    density = xp.logaddexp(xp.log1p(-tail) + half_normal, xp.log(tail) + exponential)
    beyond = xp.logaddexp(
        xp.log1p(-tail) + math.log(2.0) + _log_ndtr(-MAX_SCORE / sigma, xp), xp.log(tail) - MAX_SCORE / mean
    )
    return _censored(score, density, beyond, xp)


def log_faulty(score: Any, params: ParamArrays, loc: Any = None, xp: ModuleType = np) -> Any:
    """log density of scores (..., F) of a signal a fault drives (log-normal on score + 1, censored
    at `MAX_SCORE`), at the root's location unless `loc` says otherwise (a related node's)."""
    loc = params.array("fault_loc", xp) if loc is None else loc
    scale = params.array("fault_scale", xp)
    x = score + 1.0
    density = -xp.log(x) - xp.log(scale) - 0.5 * math.log(2 * math.pi) - 0.5 * ((xp.log(x) - loc) / scale) ** 2
    return _censored(score, density, _log_ndtr((loc - math.log(MAX_SCORE + 1.0)) / scale, xp), xp)


def log_mixture_ratio(score: Any, weight: Any, params: ParamArrays, loc: Any = None, xp: ModuleType = np) -> Any:
    """log [(w g + (1 - w) h) / h] per score: what a state with fault weight `w` adds over health
    (exactly 0 where `w` is 0: a state that drives nothing)."""
    return mixed(log_faulty(score, params, loc, xp) - log_healthy(score, params, xp), weight, xp)


def mixed(log_lr: Any, weight: Any, xp: ModuleType = np) -> Any:
    """`log_mixture_ratio` from the faulty/healthy log ratio `log_lr`."""
    w = xp.clip(weight, 1e-9, 1 - 1e-9)
    return xp.where(weight > 0, xp.logaddexp(xp.log(w) + log_lr, xp.log1p(-w)), 0.0)


def fault_peak(params: ParamArrays, xp: ModuleType = np) -> Any:
    """Per class, the score at which a root's own likelihood ratio (faulty at `fault_loc` over
    healthy) peaks, on a grid of `MAX_SCORE / 1200`. Past it the log-normal would call a stronger
    anomaly less likely a fault, so a root's scores are read as at most this: more anomalous never
    means less suspect."""
    return xp.asarray(_cached_peak(params)) if isinstance(params, HealthParams) else _grid_peak(params, xp)


@functools.lru_cache(maxsize=8)
def _cached_peak(params: HealthParams) -> npt.NDArray[np.float64]:
    peak: npt.NDArray[np.float64] = _grid_peak(params, np)
    return peak


def _grid_peak(params: ParamArrays, xp: ModuleType) -> Any:
    grid = xp.linspace(0.0, MAX_SCORE, 1201, dtype=xp.float64)[:, None]
    ratio = log_faulty(grid, params, xp=xp) - log_healthy(grid, params, xp)
    return grid[xp.argmax(ratio, axis=0), 0]


def root_scores(score: Any, params: ParamArrays, xp: ModuleType = np) -> Any:
    """A root's scores as its own likelihood reads them: capped at `fault_peak`."""
    return xp.minimum(score, fault_peak(params, xp))


def log_prior(valid: Any, params: ParamArrays, xp: ModuleType = np) -> Any:
    """The proper prior over (candidate, class), (R, C): each measurable pair in proportion to its
    class's `class_rate`, so a candidate's share is the sum of the rates it can be measured in.
    `valid`: (R, C) or the evidence's mask (R, columns), whose class columns come first."""
    rate = params.array("class_rate", xp)
    valid = valid[..., : rate.shape[0]]
    total = xp.clip((valid * rate).sum(), 1e-300, None)
    return xp.where(valid, xp.log(rate) - xp.log(total), -math.inf)


def stalled(lockstep: Any, params: ParamArrays, xp: ModuleType = np) -> Any:
    """(..., C): what a root's lockstep group adds over health, its stall summed out, from
    `lockstep` (...), the sum of its members' `log_mixture_ratio` at their relations' weights
    (tempered, where the caller tempers): log(s_c e^lockstep + 1 - s_c), s_c the `stall_rate` of
    the root's class (0 where it has no such members)."""
    rate = params.array("stall_rate", xp)
    return xp.logaddexp(xp.log(rate) + lockstep[..., None], xp.log1p(-rate))


SHIPPED = Path(__file__).with_name("params.json")


def save_params(params: HealthParams, path: Path) -> None:
    path.write_text(json.dumps(asdict(params), indent=1) + "\n")


@functools.lru_cache(maxsize=8)
def params_version(params: HealthParams) -> str:
    """A short stable name of the parameters' content: the first 12 hex digits of the sha256 of
    their canonical JSON (sorted keys, exact floats), the same for a file and what it loads."""
    canonical = json.dumps(asdict(params), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


@functools.lru_cache(maxsize=8)
def load_params(path: Path = SHIPPED) -> HealthParams:
    """Parameters from JSON (default: the ones shipped, fitted by `python -m benchmarks.train`)."""
    raw = json.loads(path.read_text())

    def floats(key: str) -> tuple[float, ...]:
        return tuple(float(x) for x in raw[key])

    return HealthParams(
        healthy_scale=floats("healthy_scale"),
        tail_weight=floats("tail_weight"),
        tail_mean=floats("tail_mean"),
        fault_loc=floats("fault_loc"),
        fault_scale=floats("fault_scale"),
        activation=tuple(tuple(float(x) for x in row) for row in raw["activation"]),
        relation_weight=_relation_rows(raw["relation_weight"], HealthParams().relation_weight),
        relation_loc=_relation_rows(raw["relation_loc"], HealthParams().relation_loc),
        temperature=float(raw["temperature"]),
        class_rate=floats("class_rate") if "class_rate" in raw else HealthParams().class_rate,
        stall_rate=floats("stall_rate") if "stall_rate" in raw else HealthParams().stall_rate,
    )


def _relation_rows(rows: list[list[float]], default: tuple[tuple[float, ...], ...]) -> tuple[tuple[float, ...], ...]:
    """Per-relation rows from JSON; relations a file predates take their defaults."""
    read = tuple(tuple(float(x) for x in row) for row in rows)
    return read + default[len(read) :]
