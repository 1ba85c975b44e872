"""Load over time: request arrivals with a daily cycle and a slower minutes-scale wave, and the
short hiccups of noisy services."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

DAY_S = 86_400.0
_BIN_S = 0.1


@dataclass(frozen=True, slots=True)
class Traffic:
    """Mean `rate` requests per second over a day (peak at 15:00 UTC, trough at 03:00), a slower
    minutes-scale wave, and optionally a burst: load `burst_factor` times higher in
    [burst_start_ns, burst_end_ns)."""

    start_ns: int
    end_ns: int
    rate: float
    wave_period_s: float
    wave_phase: float
    day_amplitude: float = 0.35
    wave_amplitude: float = 0.12
    burst_start_ns: int = 0
    burst_end_ns: int = 0
    burst_factor: float = 1.0

    def load(self, t_ns: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """Request rate at `t_ns` relative to the day's mean."""
        t = t_ns / 1e9
        day = 1.0 + self.day_amplitude * np.sin(2 * math.pi * ((t % DAY_S) / DAY_S - 0.375))
        wave = 1.0 + self.wave_amplitude * np.sin(2 * math.pi * t / self.wave_period_s + self.wave_phase)
        burst = np.where((t_ns >= self.burst_start_ns) & (t_ns < self.burst_end_ns), self.burst_factor, 1.0)
        result: npt.NDArray[np.float64] = day * wave * burst
        return result

    def arrivals(self, rng: np.random.Generator) -> npt.NDArray[np.int64]:
        """Request start times (sorted), an inhomogeneous Poisson process in 100 ms bins."""
        bin_ns = int(_BIN_S * 1e9)
        edges = np.arange(self.start_ns, self.end_ns, bin_ns, dtype=np.int64)
        counts = rng.poisson(self.rate * _BIN_S * self.load(edges))
        starts = np.repeat(edges, counts) + rng.integers(0, bin_ns, int(counts.sum()))
        return np.sort(starts)


@dataclass(frozen=True, slots=True)
class Hiccups:
    """Windows in which a noisy service is slow and error-prone (GC pauses, noisy neighbours)."""

    service: npt.NDArray[np.int64]
    start_ns: npt.NDArray[np.int64]
    end_ns: npt.NDArray[np.int64]
    factor: npt.NDArray[np.float64]

    @staticmethod
    def draw(
        services: list[int],
        start_ns: int,
        end_ns: int,
        rng: np.random.Generator,
        count: tuple[int, int] = (2, 5),
        factor: tuple[float, float] = (2.5, 5.0),
    ) -> Hiccups:
        """[lo, hi) hiccups per service, each 10-40 s long and `factor` times slower."""
        counts = rng.integers(*count, len(services))
        service = np.repeat(np.asarray(services, np.int64), counts)
        n = service.shape[0]
        begin = rng.integers(start_ns, end_ns, n)
        length = (rng.uniform(10, 40, n) * 1e9).astype(np.int64)
        return Hiccups(service, begin, begin + length, rng.uniform(*factor, n))

    def factors(self, service: npt.NDArray[np.int64], t_ns: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """The slowdown of each (service, time) pair (1 outside every hiccup)."""
        out = np.ones(service.shape[0])
        for s, lo, hi, f in zip(self.service, self.start_ns, self.end_ns, self.factor, strict=True):
            out[(service == s) & (t_ns >= lo) & (t_ns < hi)] *= f
        return out
