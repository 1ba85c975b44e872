"""A case's healthy conditions, drawn from its profile: per-operation latency levels and spread,
background error rates, busy-but-healthy services (high latency, unchanged through the case) and,
on the LLM topology, each engine replica's serving levels."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from simulation.levels import RankLevels, ServingLevels
from simulation.profiles import DEFAULT, Profile
from simulation.topology import CompiledTopology

Array = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Conditions:
    op_scale: Array  # per operation, its median self time's multiplier
    sigma_scale: float
    error_scale: float
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
            hot=hot,
            serving=serving,
            ranks=ranks,
        )
