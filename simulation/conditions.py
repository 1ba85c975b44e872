"""A case's healthy conditions, drawn from its profile: per-operation latency levels and spread,
background error rates, how each operation passes on its calls' failures, how self time grows
with load, network time, busy-but-healthy services (high latency, unchanged through the case) and,
on the LLM topology, each engine replica's serving levels."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from simulation.levels import RankLevels, ServingLevels
from simulation.profiles import DEFAULT, Profile
from simulation.topology import CompiledTopology

Array = npt.NDArray[np.float64]
# The topology as written (`Conditions.neutral`): mid-range call physics.
NEUTRAL_PROPAGATION = 0.5
NEUTRAL_LOAD_EXPONENT = 0.3
NEUTRAL_NETWORK_S = 3e-4
NEUTRAL_TRANSIENT_FAILURES = 0.003


@dataclass(frozen=True, slots=True)
class Conditions:
    op_scale: Array  # per operation, its median self time's multiplier
    sigma_scale: float
    error_scale: float
    op_propagation: Array  # per operation, the chance a failed call fails its span too
    load_exponent: float  # self time grows as load to this power
    network_s: float  # median one-way network time of a remote call
    transient_failures: float  # remote calls that fail at first and are retried
    hot: tuple[str, ...]  # busy-but-healthy services
    serving: ServingLevels | None  # the LLM model and hardware
    ranks: tuple[RankLevels, ...]  # per engine replica

    @staticmethod
    def neutral(ct: CompiledTopology) -> Conditions:
        """The topology as written, with the default profile's mid-range LLM levels."""
        return Conditions.draw(ct, DEFAULT, np.random.default_rng(0), randomise=False)

    @staticmethod
    def draw(ct: CompiledTopology, profile: Profile, rng: np.random.Generator, randomise: bool = True) -> Conditions:
        n_ops = len(ct.calls)
        t = ct.topology
        scale = rng.lognormal(0.0, profile.median_spread, n_ops) if randomise else np.ones(n_ops)
        hot: tuple[str, ...] = ()
        if randomise:
            workers = {w for e in t.engines for w in e.workers} | {e.engine for e in t.engines}
            skip = set(t.user_facing) | workers
            pool = [s for i, s in enumerate(ct.services) if s not in skip and ct.service_visits[i] > 0]
            count = min(int(rng.integers(*profile.hot_services)), len(pool))
            hot = tuple(str(s) for s in rng.choice(pool, count, replace=False))
            for service in hot:
                scale[ct.op_service == ct.service_index[service]] *= profile.hot_factor.one(rng)
        serving = None
        ranks: tuple[RankLevels, ...] = ()
        if t.engines:
            tp = len(t.engines[0].workers)
            serving = ServingLevels.draw(profile, tp, rng)
            ranks = tuple(RankLevels.draw(profile, tp, rng) for _ in t.engines)
        return Conditions(
            op_scale=scale,
            sigma_scale=profile.sigma_scale.one(rng) if randomise else 1.0,
            error_scale=profile.error_scale.one(rng) if randomise else 1.0,
            op_propagation=(
                profile.error_propagation.many(rng, n_ops) if randomise else np.full(n_ops, NEUTRAL_PROPAGATION)
            ),
            load_exponent=profile.load_exponent.one(rng) if randomise else NEUTRAL_LOAD_EXPONENT,
            network_s=profile.network_s.one(rng) if randomise else NEUTRAL_NETWORK_S,
            transient_failures=profile.transient_failures.one(rng) if randomise else NEUTRAL_TRANSIENT_FAILURES,
            hot=hot,
            serving=serving,
            ranks=ranks,
        )
