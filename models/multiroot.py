"""Several roots at once: the two-root health model, weighed against one root by the evidence.

Two roots (r1, c1) and (r2, c2) on distinct nodes each put every node in the state a single root
puts it in (`models.posterior`: the root's own class activations, its related nodes' relation
weights). A node both reach draws each score from their noisy-OR: driven by root k with
probability w_k, independently, and by either one's faulty density with equal chance when driven
by both. Against all-healthy, with L_k root k's faulty/healthy ratio at its location,

    log [(1 - w1)(1 - w2) + w1 (1 - w2/2) L1 + w2 (1 - w1/2) L2],

which is the single root's term where only one root reaches the node: a pair's log likelihood is
the two single roots' plus a correction on the nodes both reach. A root's lockstep group enters
its single-root likelihood as one term, its stall summed out (`models.health.stalled`); a node of
that group the other root reaches adds its correction inside it: log(q e^C + 1 - q), with C the
(tempered) corrections on those nodes and q the posterior probability, from the root's evidence
alone, that its fault stalled the group (two roots in distinct groups share no lockstep node). A second root has prior
probability `EXTRA_ROOT_PRIOR` and falls as the first does, so a pair's prior is the product of
its roots' single-root priors; a pair within one group (`CausalStructure.group`: one node, one
service's nodes, a lockstep group's ranks, whose evidence moves together whichever of them is at
fault) is told apart from one root by nothing, and is not weighed as two. The comparison is a
Bayes factor. The marginal likelihood of one root is exact (over every candidate); that of two is
summed over the pairs of the `TOP` most probable single-root (node, class) entries, a lower bound
on the whole sum: what is left out never makes "two roots" likelier. O(TOP² × the nodes several
entries reach), no torch on the serving path.

`models.enumeration.two_root_model` states the same model in Pyro; with both roots enumerated,
TraceEnum_ELBO gives its exact log evidence, which the tests check against `compare_roots`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt
from numba import njit

from models.health import HealthParams, log_faulty, log_healthy, log_prior, mixed, root_scores, stalled
from models.posterior import IN_LOCKSTEP, lockstep_sums, observed
from models.structure import CausalStructure, Relation

Array = npt.NDArray[np.float64]
Index = npt.NDArray[np.int64]

EXTRA_ROOT_PRIOR = 0.01  # prior probability that an incident has a second, independent root
TOP = 8  # single-root (node, class) entries one of the two roots is enumerated over


@dataclass(frozen=True, slots=True)
class TwoRoots:
    """The comparison: the log posterior odds of two roots over one, and, given two, each node's
    probability that it is one of them and its most probable class, most probable first."""

    log_odds: float
    nodes: Index  # candidate positions (as reported)
    probability: Array
    classes: Index


def states(
    score: Any, related: Any, own: Any, classes: Any, params: HealthParams, xp: ModuleType = np
) -> tuple[Any, Any, Any]:
    """The state an entry (root, class) puts nodes in: fault weight, location of the faulty
    density and the score as read (a root's own capped), each (..., F). `related`: the nodes'
    `Relation` to the root, `own`: which node is the root, both (...); `classes` indexes the
    activations to broadcast with them; `score`: the nodes' (..., F)."""
    mine = own[..., None]
    weight = xp.where(mine, params.array("activation", xp)[classes], params.array("relation_weight", xp)[related])
    loc = xp.where(mine, params.array("fault_loc", xp), params.array("relation_loc", xp)[related])
    read = xp.where(mine, root_scores(score, params, xp), score)
    return weight, loc, read


def log_pair_ratio(weight: tuple[Any, Any], log_lr: tuple[Any, Any], xp: ModuleType = np) -> Any:
    """log [(1-w1)(1-w2) + w1 (1-w2/2) L1 + w2 (1-w1/2) L2] per score: what two roots reaching a
    node add over health; a root with weight 0 adds exactly nothing (as in
    `models.health.log_mixture_ratio`, which clips weights below 1 alike)."""
    w1, w2 = (xp.clip(w, 0.0, 1 - 1e-9) for w in weight)
    log_w1, log_w2 = (xp.where(w > 0, xp.log(xp.where(w > 0, w, 1.0)), -math.inf) for w in (w1, w2))
    neither = xp.log1p(-w1) + xp.log1p(-w2)
    first = log_w1 + xp.log1p(-w2 / 2) + log_lr[0]
    second = log_w2 + xp.log1p(-w1 / 2) + log_lr[1]
    return xp.logaddexp(xp.logaddexp(neither, first), second)


def _log_lr(weight: Array, loc: Array, read: Array, params: HealthParams) -> tuple[Array, Array]:
    """Per score: the faulty/healthy log ratio at `loc`, and the single state's mixture term."""
    log_lr = log_faulty(read, params, loc) - log_healthy(read, params)
    return log_lr, mixed(log_lr, weight)


def compare_roots(
    score: Array,
    structure: CausalStructure,
    log_post: Array,
    params: HealthParams,
    *,
    report: Index | None = None,
    lockstep: Array | None = None,
    top: int = TOP,
    extra_root_prior: float = EXTRA_ROOT_PRIOR,
) -> TwoRoots | None:
    """Two roots against one. score: the candidates' (R, F) scores, NaN where unmeasurable;
    structure: theirs (`models.structure`); log_post: `models.posterior.log_posterior`'s (R, F);
    report: the candidate each is reported as (default: itself); lockstep: each candidate's
    lockstep group's tempered term (`models.posterior.lockstep_sums`, computed when not given).
    None with no pair to weigh.

    The enumerated pairs: one root among the `top` single-root entries S, the other anywhere
    (a pair with one root outside S stands for both its orders). A pair's correction to its two
    roots' likelihoods comes from the nodes both reach, and depends on the other root only
    through its relation to each such node (or its class, on its own node): one table per
    (entry of S, node it reaches) of every state the other root can put the node in, summed
    over the relation matrix's nonzeros, gives every pair's."""
    if not 0.0 < extra_root_prior < 1.0:
        raise ValueError(f"extra_root_prior must lie in (0, 1), not {extra_root_prior}")
    n_candidates, n_faults = log_post.shape  # classes (the scores have their columns and `WAIT`)
    relation = structure.relation
    if n_candidates < 2:  # two roots need two nodes
        return None
    if lockstep is None:
        lockstep = lockstep_sums(score, structure, params) / params.temperature
    flat = np.argsort(-log_post, axis=None, kind="stable")[:top]
    roots, classes = np.divmod(flat[np.isfinite(log_post.reshape(-1)[flat])], n_faults)
    s, mask = observed(score)
    reach = relation[roots] != Relation.NONE
    reach[np.arange(roots.shape[0]), roots] = True
    nodes = np.flatnonzero(reach.any(axis=0))  # the nodes an entry of S reaches
    entry, at = np.nonzero(reach[:, nodes])  # every (entry of S, node it reaches)
    single, table = _tables(s, mask, relation, roots, classes, entry, nodes, at, params)
    in_group = IN_LOCKSTEP[relation[roots[entry], nodes[at]]]  # the node is in the entry's lockstep group
    apart, together = (np.bincount(entry, weights=single * (in_group == g), minlength=roots.shape[0]) for g in (0, 1))
    temperature = params.temperature
    log_z1 = (
        apart[0] / temperature
        + stalled(together[0] / temperature, params)[classes[0]]
        + log_prior(mask, params)[roots[0], classes[0]]
        - log_post[roots[0], classes[0]]
    )
    groups = (together / temperature, classes, lockstep)  # the entries' and every candidate's, tempered
    mirrored = np.full((n_candidates, n_faults), math.log(2.0))
    mirrored[roots, classes] = 0.0
    with np.errstate(invalid="ignore"):
        log_ratio = (  # log [p(pair, evidence | two roots) / p(evidence | one root)]
            log_post[roots, classes][:, None, None]
            + log_post[None, :, :]
            + log_z1
            + _corrections(table, structure, in_group, entry, nodes, at, groups, params)
            + mirrored
        )
    group = structure.group
    log_ratio[group[roots][:, None] == group[None, :]] = -math.inf  # two roots in one group
    peak = float(log_ratio.max(initial=-math.inf))
    if not math.isfinite(peak):
        return None
    posterior = np.exp(log_ratio - peak)
    log_z2 = peak + math.log(float(posterior.sum()))
    log_odds = math.log(extra_root_prior) - math.log1p(-extra_root_prior) + log_z2
    return _reported(
        posterior / posterior.sum(), roots, classes, log_odds, np.arange(n_candidates) if report is None else report
    )


def _tables(
    s: Array,
    mask: npt.NDArray[np.bool_],
    relation: npt.NDArray[np.int8],
    roots: Index,
    classes: Index,
    entry: Index,
    nodes: Index,
    at: Index,
    params: HealthParams,
) -> tuple[Array, Array]:
    """Per (entry of S, node `nodes[at]` it reaches): what the entry adds there over health, and
    what a pair adds beyond its two roots for each state the other root can put the node in (its
    relations to the node, then the node as the other root in each class), summed over signals."""
    node = nodes[at]
    weight, loc, read = states(s[node], relation[roots[entry], node], node == roots[entry], classes[entry], params)
    log_lr, single = _log_lr(weight, loc, read, params)  # (P, F)
    n_codes, n_faults = len(Relation) - 1, len(params.class_rate)
    other = states(
        s[nodes][:, None, :],
        np.concatenate([np.arange(1, n_codes + 1), np.zeros(n_faults, np.int64)]),
        np.arange(n_codes + n_faults) >= n_codes,
        np.concatenate([np.zeros(n_codes, np.int64), np.arange(n_faults)]),
        params,
    )
    other_lr, other_single = _log_lr(*other, params)  # (nodes, states, F)
    measured = mask[node]
    row, signal = np.nonzero(measured)  # the measured scores only: (M,), row-major
    theirs = at[row]
    pair = log_pair_ratio(
        (weight[row, signal][:, None], np.broadcast_to(other[0], other_lr.shape)[theirs, :, signal]),
        (log_lr[row, signal][:, None], other_lr[theirs, :, signal]),
    )  # (M, states)
    cell = pair - single[row, signal][:, None] - other_single[theirs, :, signal]
    table = np.zeros((node.shape[0], other_lr.shape[1]))
    if row.shape[0]:
        starts = np.flatnonzero(np.r_[True, row[1:] != row[:-1]])
        table[row[starts]] = np.add.reduceat(cell, starts, axis=0)
    return np.where(measured, single, 0.0).sum(axis=1), table


def _stall_odds(lockstep: Array, params: HealthParams) -> tuple[Array, Array]:
    """log q and log(1 - q), (..., C): the probability that a root of each class stalled its
    lockstep group, given the group's tempered term `lockstep` (...)."""
    rate = params.array("stall_rate")
    stalls = np.log(rate) + lockstep[..., None]
    total = np.logaddexp(stalls, np.log1p(-rate))
    return stalls - total, np.log1p(-rate) - total


def _corrections(
    table: Array,
    structure: CausalStructure,
    in_group: npt.NDArray[np.bool_],
    entry: Index,
    nodes: Index,
    at: Index,
    groups: tuple[Array, Index, Array],
    params: HealthParams,
) -> Array:
    """(K, R, F), tempered: what each pair (entry of S, (candidate, class)) adds beyond its two
    roots. A correction on a node in one root's lockstep group (`in_group`: the entry's, per
    (entry, node) pair; the other root's, by its relation) counts within that group's stall,
    log(q e^C + 1 - q), q from the group's own tempered term (`groups`: the entries' (K,) with
    their classes, every candidate's (R,))."""
    n_codes, relation = len(Relation) - 1, structure.relation
    n_entries, n_faults = groups[0].shape[0], len(params.stall_rate)
    correction = np.zeros((n_entries, relation.shape[0], n_faults))
    correction[entry, nodes[at]] = table[:, n_codes:]  # the other root on a node the entry reaches
    by_relation = np.zeros((n_entries, nodes.shape[0], len(Relation)))
    by_relation[entry, at, 1:] = table[:, :n_codes]
    entry_group = np.zeros((n_entries, nodes.shape[0]), np.bool_)
    entry_group[entry, at] = in_group
    # the other root related to a node the entry reaches, row by row (as `np.nonzero(relation[:, nodes])`)
    column_of = np.full(relation.shape[0], -1)
    column_of[nodes] = np.arange(nodes.shape[0])
    apart, entrys, others = _related_sums(structure.related, relation, column_of, by_relation, entry_group, IN_LOCKSTEP)
    correction = (correction + apart[:, :, None]) / params.temperature
    entries_group, classes, candidates_group = groups
    k, j = np.nonzero(entrys)  # mostly none: no lockstep group, or none the other root reaches
    if k.shape[0]:
        stalls, calm = (odds[np.arange(k.shape[0]), classes[k]] for odds in _stall_odds(entries_group[k], params))
        correction[k, j] += np.logaddexp(stalls + entrys[k, j] / params.temperature, calm)[:, None]
    k, j = np.nonzero(others)
    if k.shape[0]:
        stalls, calm = _stall_odds(candidates_group[j], params)  # (n, C): the other root in each class
        correction[k, j] += np.logaddexp(stalls + (others[k, j] / params.temperature)[:, None], calm)
    return correction


@njit(cache=True, nogil=True)
def _related_sums(
    related: Index,
    relation: npt.NDArray[np.int8],
    column_of: Index,
    by_relation: Array,
    entry_group: npt.NDArray[np.bool_],
    in_lockstep: npt.NDArray[np.bool_],
) -> tuple[Array, Array, Array]:
    """Three (K, R): per other root, the sum over the reached nodes it is related to of
    `by_relation[k, column, its relation to the node]`, in the order of `related` (row-major): on
    nodes in neither root's lockstep group, in the entry's (`entry_group`), in the other root's."""
    n = relation.shape[0]
    apart = np.zeros((by_relation.shape[0], n))
    entrys, others = np.zeros_like(apart), np.zeros_like(apart)
    for position in related:
        row, node = divmod(position, n)
        column = column_of[node]
        if column >= 0:
            kind = relation[row, node]
            for k in range(by_relation.shape[0]):
                value = by_relation[k, column, kind]
                if in_lockstep[kind]:
                    others[k, row] += value
                elif entry_group[k, column]:
                    entrys[k, row] += value
                else:
                    apart[k, row] += value
    return apart, entrys, others


def _reported(posterior: Array, roots: Index, classes: Index, log_odds: float, report: Index) -> TwoRoots:
    """Per reported node, P(it is one of the roots) and its most probable class, from the
    posterior over pairs (entry of S, (candidate, class))."""
    n_candidates, n_faults = posterior.shape[1:]
    first = posterior.sum(axis=(1, 2))  # (K,): the entry of S
    second = posterior.sum(axis=2)  # (K, R)
    apart = report[None, :] != report[roots][:, None]  # a pair on one reported node counts once
    probability = np.bincount(report[roots], weights=first, minlength=n_candidates) + np.bincount(
        report, weights=(second * apart).sum(axis=0), minlength=n_candidates
    )
    cells = n_candidates * n_faults
    by_class = np.bincount(report[roots] * n_faults + classes, weights=first, minlength=cells) + np.bincount(
        (report[:, None] * n_faults + np.arange(n_faults)).reshape(-1),
        weights=posterior.sum(axis=0).reshape(-1),
        minlength=cells,
    )
    order = np.argsort(-probability, kind="stable")
    order = order[probability[order] > 0.0]
    classes_of = by_class.reshape(n_candidates, n_faults).argmax(axis=1)
    return TwoRoots(log_odds, order, np.clip(probability[order], 0.0, 1.0), classes_of[order])
