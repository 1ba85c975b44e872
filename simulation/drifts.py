"""Unrelated changes during a case: services that drift while the fault plays out, healthy all along.

Real incidents rarely come alone in their window: a deploy, a cron job, a cache that expired or
a shift in what users ask for changes some other service at about the same time. A drift takes
one service that no root runs on and, from a random moment for a few minutes or to the case's
end, slows its code (`SLOW`), lets a share of its requests fail (`ERRORS`), or makes one of its
operations send one of its calls less often (`CALLS`: more cache hits, a new client version).
Sizes are drawn from the profile; they know nothing of the evidence rca computes. Drifts are
drawn from a stream of their own (`simulation.scenarios`): a case's fault, traffic and levels
are what they were without them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from simulation.faults import SECOND, FaultPlan
from simulation.profiles import Profile
from simulation.topology import CompiledTopology

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]
_LENGTH_S = (120.0, 600.0)  # how long a drift lasts, unless the case ends first


class DriftKind(StrEnum):
    SLOW = "slow"
    ERRORS = "errors"
    CALLS = "calls"


@dataclass(frozen=True, slots=True)
class Drift:
    """One service's change in [start_ns, end_ns): `size` is a self-time factor (`SLOW`), a share of
    failing requests (`ERRORS`), or the factor on the chance that `operation` makes its call
    `call` (`CALLS`)."""

    service: int
    kind: DriftKind
    start_ns: int
    end_ns: int
    size: float
    operation: int = -1
    call: int = -1


@dataclass(frozen=True, slots=True)
class Drifts:
    """A case's drifts, and what they do to each invocation."""

    items: tuple[Drift, ...] = ()

    @staticmethod
    def draw(
        ct: CompiledTopology,
        plans: tuple[FaultPlan, ...],
        start_ns: int,
        stop_ns: int,
        profile: Profile,
        rng: np.random.Generator,
    ) -> Drifts:
        """`profile.drifts` [lo, hi) drifts on distinct services that no root runs on and that are
        neither LLM engines nor their workers, each of a kind drawn uniformly (a service that
        makes no call is slowed or fails instead)."""
        t = ct.topology
        skip = {s for e in t.engines for s in (e.engine, *e.workers)} | {p.service for p in plans}
        has_ops = set(ct.op_service.tolist())
        pool = [i for i, s in enumerate(ct.services) if s not in skip and i in has_ops and ct.service_visits[i] > 0]
        count = min(int(rng.integers(*profile.drifts)), len(pool))
        items = []
        for service in rng.choice(np.asarray(pool, np.int64), count, replace=False).tolist():
            kind = list(DriftKind)[int(rng.integers(len(DriftKind)))]
            begin = int(rng.uniform(start_ns / SECOND, stop_ns / SECOND - 60)) * SECOND
            end = min(stop_ns, begin + int(rng.uniform(*_LENGTH_S)) * SECOND)
            calling = [
                (o, c) for o in np.flatnonzero(ct.op_service == service).tolist() for c in range(len(ct.calls[o]))
            ]
            if kind is DriftKind.CALLS and not calling:
                kind = DriftKind.SLOW if rng.random() < 0.5 else DriftKind.ERRORS
            if kind is DriftKind.CALLS:
                operation, call = calling[int(rng.integers(len(calling)))]
                items.append(Drift(service, kind, begin, end, profile.drift_calls.one(rng), operation, call))
            else:
                size = (profile.drift_slowdown if kind is DriftKind.SLOW else profile.drift_errors).one(rng)
                items.append(Drift(service, kind, begin, end, size))
        return Drifts(tuple(items))

    def services(self, ct: CompiledTopology) -> tuple[str, ...]:
        return tuple(str(ct.services[d.service]) for d in self.items)

    def slowdown(self, service: I64, t_ns: I64) -> F64:
        """Each invocation's self-time factor (1 where no `SLOW` drift is on)."""
        out = np.ones(service.shape[0])
        for d in self._of(DriftKind.SLOW):
            out[self._on(d, service, t_ns)] *= d.size
        return out

    def failed(self, service: I64, t_ns: I64, rng: np.random.Generator) -> npt.NDArray[np.bool_]:
        """Which invocations an `ERRORS` drift fails (drawing nothing where there is none)."""
        failed = np.zeros(service.shape[0], np.bool_)
        for d in self._of(DriftKind.ERRORS):
            on = np.flatnonzero(self._on(d, service, t_ns))
            failed[on[rng.random(on.shape[0]) < d.size]] = True
        return failed

    def call_factor(self, operation: int, call: int, t_ns: I64) -> F64 | None:
        """The factor on the chance that each invocation of `operation` (at `t_ns`) makes its call
        `call`; None where no `CALLS` drift touches that call."""
        drifts = [d for d in self._of(DriftKind.CALLS) if d.operation == operation and d.call == call]
        if not drifts:
            return None
        out = np.ones(t_ns.shape[0])
        for d in drifts:
            out[(t_ns >= d.start_ns) & (t_ns < d.end_ns)] *= d.size
        return out

    def _of(self, kind: DriftKind) -> list[Drift]:
        return [d for d in self.items if d.kind is kind]

    @staticmethod
    def _on(d: Drift, service: I64, t_ns: I64) -> npt.NDArray[np.bool_]:
        on: npt.NDArray[np.bool_] = (service == d.service) & (t_ns >= d.start_ns) & (t_ns < d.end_ns)
        return on


NO_DRIFTS = Drifts()
