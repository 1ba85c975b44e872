"""One health model, stated in Pyro, served in closed form, learned with Pyro.

The served closed form equals Pyro's enumeration and a brute force written here from scipy's
densities, on random structures with every relation kind; the learning recovers parameters from
scores drawn from the model itself (clipped at `MAX_SCORE` as the evidence is), shrinks a class
with two cases toward its group, and is deterministic."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats
from scipy.special import logsumexp

from models.enumeration import enumerated_posterior
from models.health import HealthParams
from models.learning import Labelled, case_batch, learn
from models.posterior import log_posterior, observed
from models.structure import CausalStructure, Relation
from rca.evidence.nodes import N_COLUMNS, N_FAULTS
from rca.evidence.rows import MAX_SCORE

KINDS = len(Relation)


def random_params(rng: np.random.Generator) -> HealthParams:
    """Parameters unlike the defaults: relation locations above and below the root's."""
    loc = rng.uniform(1.0, 3.5, N_COLUMNS)
    weight = rng.uniform(0.01, 0.95, (KINDS, N_COLUMNS))
    weight[Relation.NONE] = 0.0
    return HealthParams(
        healthy_scale=tuple(rng.uniform(0.5, 2.0, N_COLUMNS)),
        tail_weight=tuple(rng.uniform(0.005, 0.3, N_COLUMNS)),
        tail_mean=tuple(rng.uniform(0.5, 8.0, N_COLUMNS)),
        fault_loc=tuple(loc),
        fault_scale=tuple(rng.uniform(0.3, 1.2, N_COLUMNS)),
        activation=tuple(map(tuple, rng.uniform(0.01, 0.99, (N_FAULTS, N_COLUMNS)))),
        relation_weight=tuple(map(tuple, weight)),
        relation_loc=tuple(map(tuple, loc + rng.uniform(-1.5, 1.5, (KINDS, N_COLUMNS)))),
        temperature=float(rng.uniform(0.5, 3.0)),
        class_rate=tuple(rng.uniform(0.1, 5.0, N_FAULTS)),
        stall_rate=tuple(rng.uniform(0.05, 0.95, N_FAULTS)),
    )


def random_case(rng: np.random.Generator, n_nodes: int) -> tuple[np.ndarray, CausalStructure]:
    """Scores of `n_nodes` nodes (NaN where unmeasured, some huge) and a structure over a random
    subset of candidates whose relation matrix holds every kind."""
    score = rng.exponential(1.5, (n_nodes, N_COLUMNS))
    huge = rng.random(score.shape) < 0.1
    score[huge] = rng.choice([MAX_SCORE, 200.0, 1e4], huge.sum())
    score[rng.random(score.shape) < 0.3] = np.nan
    score[rng.integers(n_nodes), :] = np.nan  # a node with nothing measured
    candidates = np.sort(rng.choice(n_nodes, n_nodes - 2, replace=False)).astype(np.int64)
    r = candidates.shape[0]
    relation = rng.integers(0, KINDS, (r, r)).astype(np.int8)
    off_diagonal = np.flatnonzero(~np.eye(r, dtype=bool))
    relation.flat[rng.choice(off_diagonal, KINDS, replace=False)] = np.arange(KINDS)
    np.fill_diagonal(relation, Relation.NONE)
    group = rng.integers(0, r, r)  # some candidates share a group (no bearing on one root)
    return score, CausalStructure(candidates, relation, np.full(n_nodes, -1, np.int64), group)


def censored(x: np.ndarray, density: np.ndarray, beyond: np.ndarray) -> np.ndarray:
    """The density below `MAX_SCORE`; at or past it (a clipped score), the mass beyond it."""
    return np.where(x >= MAX_SCORE, beyond, density)


def log_healthy(x: np.ndarray, p: HealthParams) -> np.ndarray:
    """Half-normal with an exponential tail, from scipy."""
    sigma, tail, mean = (np.asarray(getattr(p, n)) for n in ("healthy_scale", "tail_weight", "tail_mean"))
    density = np.logaddexp(
        np.log1p(-tail) + stats.halfnorm.logpdf(x, scale=sigma), np.log(tail) + stats.expon.logpdf(x, scale=mean)
    )
    beyond = np.logaddexp(
        np.log1p(-tail) + stats.halfnorm.logsf(MAX_SCORE, scale=sigma),
        np.log(tail) + stats.expon.logsf(MAX_SCORE, scale=mean),
    )
    return censored(x, density, beyond)


def log_faulty(x: np.ndarray, p: HealthParams, loc: np.ndarray) -> np.ndarray:
    """score + 1 log-normal, from scipy."""
    s, scale = np.asarray(p.fault_scale), np.exp(loc)
    density = stats.lognorm.logpdf(x + 1.0, s=s, scale=scale)
    return censored(x, density, stats.lognorm.logsf(MAX_SCORE + 1.0, s=s, scale=scale))


def log_state(x: np.ndarray, p: HealthParams, weight: np.ndarray, loc: np.ndarray) -> np.ndarray:
    """log (w faulty + (1 - w) healthy); healthy alone where w is 0."""
    healthy = log_healthy(x, p)
    with np.errstate(divide="ignore"):
        return np.where(
            weight > 0, np.logaddexp(np.log(weight) + log_faulty(x, p, loc), np.log1p(-weight) + healthy), healthy
        )


LOCKSTEP = (Relation.COLLECTIVE, Relation.LOCKSTEP)


def brute_force(score: np.ndarray, structure: CausalStructure, p: HealthParams) -> np.ndarray:
    """Log posterior over (candidate, class): every cause's joint density of every measured score,
    tempered, under a prior over the measurable (candidate, class) pairs in proportion to the
    class's rate, with whether the fault stalls the root's lockstep group (its communicator's
    ranks, its engine's GPUs: healthy unless it does) summed out at the class's stall rate. A
    root's own scores are read at most at the score where its own faulty/healthy ratio peaks on the
    grid of `MAX_SCORE / 1200` (a stronger anomaly is never less suspect)."""
    measured = ~np.isnan(score[structure.candidates])
    x = np.nan_to_num(score[structure.candidates])
    loc = np.asarray(p.fault_loc)
    grid = np.linspace(0.0, MAX_SCORE, 1201)[:, None]
    peak = grid[np.argmax(log_faulty(grid, p, loc) - log_healthy(grid, p), axis=0), 0]
    r_count, c_count = x.shape[0], len(p.class_rate)  # the scores' columns: the classes' first
    rate = np.asarray(p.class_rate)
    out = np.full((r_count, c_count), -np.inf)
    for r in range(r_count):
        classes = np.flatnonzero(measured[r, :c_count])
        for c in classes:
            joint = []
            for stalls in (False, True):
                total = 0.0
                for i in range(r_count):
                    seen = measured[i]
                    k = structure.relation[r, i]
                    if i == r:
                        read = np.minimum(x[i], peak)
                        own = log_state(read, p, np.asarray(p.activation[c]), loc) - log_healthy(read, p)
                        density = log_healthy(x[i], p) + own
                    else:
                        weight = np.asarray(p.relation_weight[k]) * (stalls or k not in LOCKSTEP)
                        density = log_state(x[i], p, weight, np.asarray(p.relation_loc[k]))
                    total += float(density[seen].sum())
                chance = p.stall_rate[c] if stalls else 1.0 - p.stall_rate[c]
                joint.append(math.log(chance) + total / p.temperature)
            out[r, c] = math.log(rate[c]) + float(logsumexp(joint))
    return out - logsumexp(out)


def assert_same_log(served: np.ndarray, brute: np.ndarray) -> None:
    """Equal log posteriors, the improbable causes' included; -inf at the same (root, class)."""
    assert (np.isinf(served) == np.isinf(brute)).all()
    finite = np.isfinite(brute)
    assert np.allclose(served[finite], brute[finite], rtol=1e-10, atol=1e-8)


@pytest.mark.parametrize("seed", range(6))
def test_served_posterior_equals_pyro_enumeration_and_brute_force(seed: int) -> None:
    rng = np.random.default_rng(seed)
    params = random_params(rng)
    score, structure = random_case(rng, int(rng.integers(6, 11)))
    assert set(np.unique(structure.relation).tolist()) == set(range(KINDS))

    served = np.exp(log_posterior(score, structure, params))
    s, mask = (torch.from_numpy(a) for a in observed(score))
    pyro_probs = enumerated_posterior(
        s, mask, torch.from_numpy(structure.candidates), torch.from_numpy(structure.relation).long(), params
    ).numpy()

    assert served.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.allclose(served, pyro_probs, rtol=1e-7, atol=1e-10)
    assert_same_log(log_posterior(score, structure, params), brute_force(score, structure, params))
    assert (served[np.isnan(score[structure.candidates, :N_FAULTS])] == 0.0).all()  # unmeasurable classes


def test_every_relation_kind_moves_the_posterior() -> None:
    """The comparisons have teeth: reading one node under another kind moves its root's row."""
    rng = np.random.default_rng(11)
    params = random_params(rng)
    score, structure = random_case(rng, 9)
    base = log_posterior(score, structure, params)
    seen = np.isfinite(score[structure.candidates]).any(axis=1)
    pairs = (seen[:, None] & seen[None, :]) & ~np.eye(seen.shape[0], dtype=bool)
    for kind in Relation:
        r, i = np.argwhere(pairs & (structure.relation == kind))[0]
        other = structure.relation.copy()
        other[r, i] = (kind + 1) % KINDS
        moved = CausalStructure(structure.candidates, other, structure.predecessor, structure.group)
        served = log_posterior(score, moved, params)
        finite = np.isfinite(base[r])
        assert finite.any() and (np.abs(served[r][finite] - base[r][finite]) > 1e-6).all()
        assert_same_log(served, brute_force(score, moved, params))


def draw_cases(rng: np.random.Generator, p: HealthParams, classes: list[int], n_candidates: int = 12) -> list[Labelled]:
    """One case per entry of `classes`, its scores drawn from the generative model: a random
    relation matrix, a random root of that class, whether it stalls its lockstep group (drawn from
    a stream of its own, so that the rest is drawn as without it), every node's score from its
    state's mixture."""
    stalls = np.random.default_rng(len(classes)).random(len(classes)) < np.asarray(p.stall_rate)[classes]
    cases: list[Labelled] = []
    for c, stall in zip(classes, stalls, strict=True):
        relation = rng.integers(0, KINDS, (n_candidates, n_candidates)).astype(np.int8)
        np.fill_diagonal(relation, Relation.NONE)
        root = int(rng.integers(n_candidates))
        kind = relation[root]
        weight = np.asarray(p.relation_weight)[kind]
        if not stall:
            weight[np.isin(kind, LOCKSTEP)] = 0.0
        loc = np.asarray(p.relation_loc)[kind]
        weight[root], loc[root] = p.activation[c], p.fault_loc
        shape = (n_candidates, N_COLUMNS)
        faulty = np.exp(rng.normal(loc, np.asarray(p.fault_scale), shape)) - 1.0
        tail = rng.exponential(np.asarray(p.tail_mean), shape)
        healthy = np.where(rng.random(shape) < p.tail_weight, tail, np.abs(rng.normal(0.0, p.healthy_scale, shape)))
        score = np.where(rng.random(shape) < weight, faulty, healthy)
        cases.append((np.minimum(score, MAX_SCORE), relation, root, c))  # clipped, as the evidence is
    return cases


def known_params(fault_loc: np.ndarray, off_diagonal: float = 0.05) -> HealthParams:
    """Truth for the learning tests: away from the defaults, a collective rank's signal stronger
    than its root's."""
    activation = np.full((N_FAULTS, N_COLUMNS), off_diagonal)
    np.fill_diagonal(activation, 0.9)
    weight = np.array([0.0, 0.3, 0.6, 0.1, 0.3, 0.8, 0.5, 0.6])[:, None].repeat(N_COLUMNS, axis=1)
    shift = np.array([0.0, -0.6, -0.3, -0.6, -0.3, 0.5, -0.2, 0.2])[:, None]
    return HealthParams(
        healthy_scale=(1.0,) * N_COLUMNS,
        tail_weight=(0.02,) * N_COLUMNS,
        tail_mean=(3.0,) * N_COLUMNS,
        fault_loc=tuple(fault_loc),
        fault_scale=(0.5,) * N_COLUMNS,
        activation=tuple(map(tuple, activation)),
        relation_weight=tuple(map(tuple, weight)),
        relation_loc=tuple(map(tuple, fault_loc + shift)),
        temperature=1.0,
        stall_rate=tuple(np.linspace(0.4, 0.8, N_FAULTS)),
    )


def test_learning_recovers_the_parameters_the_scores_were_drawn_with() -> None:
    rng = np.random.default_rng(5)
    # One class so loud that half its roots' scores are clipped at MAX_SCORE: read as censored,
    # they still give its location and its spread (read as exact, a pile at the clip would not).
    loud = math.log(MAX_SCORE + 1.0)
    truth = known_params(rng.permutation(np.r_[np.linspace(1.8, 3.6, N_COLUMNS - 1), loud]))
    cases = draw_cases(rng, truth, [case % N_FAULTS for case in range(240)])  # 30 roots a class
    fitted = learn(case_batch(cases), HealthParams(), steps=500)
    collective = Relation.COLLECTIVE
    # Tolerances: ~3 standard errors (30 roots' log scores at scale 0.5: 0.09; ~440 ranks a signal).
    assert np.abs(np.subtract(fitted.fault_loc, truth.fault_loc)).max() < 0.3
    assert np.abs(np.subtract(fitted.fault_scale, truth.fault_scale)).max() < 0.15
    assert np.abs(np.subtract(fitted.relation_weight[collective], 0.8)).max() < 0.1
    assert np.abs(np.subtract(fitted.relation_loc[collective], fitted.fault_loc) - 0.5).max() < 0.3  # above
    assert np.abs(np.diagonal(fitted.activation) - 0.9).max() < 0.17  # 30 roots at 0.9: 0.055 standard error
    # How often a class's roots stall their lockstep group: 30 roots a class, ~0.09 standard error each.
    stall_error = np.subtract(fitted.stall_rate, truth.stall_rate)
    assert abs(stall_error.mean()) < 0.06 and np.abs(stall_error).max() < 0.27  # 3 standard errors


def test_a_class_with_two_cases_is_pulled_toward_its_group() -> None:
    rng = np.random.default_rng(6)
    rare = N_FAULTS - 1
    truth = known_params(np.where(np.arange(N_COLUMNS) == rare, 3.6, 2.6), off_diagonal=0.001)
    cases = draw_cases(rng, truth, [case % rare for case in range(25 * rare)] + [rare, rare])
    own = np.log1p([score[root, rare] for score, _, root, c in cases if c == rare])
    assert own.min() > 3.0  # both roots show their class's signal: its two-case estimate is their mean
    fitted = learn(case_batch(cases), HealthParams(), steps=500)
    group = float(np.mean(np.delete(fitted.fault_loc, rare)))
    assert abs(group - 2.6) < 0.2
    # Between the group and its own two scores, not at the default it started from (log 10 = 2.3).
    assert group + 0.1 < fitted.fault_loc[rare] < own.mean() - 0.1
    assert fitted.fault_loc[rare] - HealthParams().fault_loc[rare] > 1.0


def test_an_activation_no_case_measured_stays_at_its_groups_mean() -> None:
    """Where no root of class c measured signal f, the cases say nothing of how often c shows f:
    the fit must not set it to lift other hypotheses (it once read an engine's errors as coming
    with a priority inversion, which lifted engines whose inversion was real)."""
    rng = np.random.default_rng(9)
    cases = draw_cases(rng, known_params(np.full(N_COLUMNS, 3.0)), list(range(N_FAULTS)) * 4)
    unmeasured = {(1, 5), (2, 6)}  # (class, signal)
    for score, _, root, c in cases:
        for cls, signal in unmeasured:
            if c == cls:
                score[root, signal] = np.nan
    batch = case_batch(cases)
    seen = batch.seen().numpy()
    assert not seen[1, 5] and not seen[2, 6] and seen.sum() == N_FAULTS * N_COLUMNS - 2
    fitted = learn(batch, HealthParams(), steps=60)
    assert fitted.activation[1][5] == pytest.approx(fitted.activation[2][6], rel=1e-12)  # both the group's mean
    assert fitted.activation[1][4] != pytest.approx(fitted.activation[1][5], rel=1e-3)  # measured: its own


def test_the_same_seed_gives_the_same_fit() -> None:
    rng = np.random.default_rng(7)
    cases = draw_cases(rng, known_params(np.full(N_COLUMNS, 3.0)), list(range(N_FAULTS)) * 2)
    batch = case_batch(cases)
    first, second = (learn(batch, HealthParams(), steps=40, seed=3) for _ in range(2))
    assert first == second
    assert first != HealthParams()


def test_a_malformed_case_is_refused() -> None:
    score, relation, root, fault = draw_cases(np.random.default_rng(8), known_params(np.full(N_COLUMNS, 3.0)), [0])[0]
    with pytest.raises(ValueError, match="relation"):
        case_batch([(score, relation[:-1], root, fault)])
    with pytest.raises(ValueError, match="class"):
        case_batch([(score, relation, root, N_FAULTS)])
    with pytest.raises(ValueError, match="measured score"):
        case_batch([(np.where(np.arange(len(score))[:, None] == root, np.nan, score), relation, root, fault)])
