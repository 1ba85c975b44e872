"""One engine replica's requests as its exporters see them: the per-request, per-rank truth the
generator drew (`llm.sample_requests`), laid on the event-time axis.

A request arrives (its `llm_request` span starts), waits in the queue, is scheduled into the
model, gets its first token, leaves the model and ends. While in the model each rank spends a
share of the time on its GPU (`device`), a share waiting in the collective (`wait`) and the rest
on the host; its DRAM runs at `dram` of peak while it computes. The KV-cache and NUMA levels are
the ones its worker spans would have carried (LLM-serving spans), read here by the exporters instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rca.telemetry.spans import Signal
from simulation.engines import EngineRequests
from simulation.invocations import Invocations
from simulation.scrape import overlap_s

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
_MIN_MODEL_S = 1e-4


@dataclass(frozen=True, slots=True)
class EngineView:
    arrive: I64  # ns
    queued: I64  # leaves the queue
    model: I64  # enters the model
    first_token: I64
    done: I64  # leaves the model
    end: I64
    model_s: F64
    tokens_in: F64
    tokens_out: F64
    collective_bytes: F64  # a request's all-reduce payload
    device: F64  # (requests, ranks) share of the in-model time on the GPU
    wait: F64  # share waiting in the collective
    dram: F64  # DRAM bandwidth use while computing (0-1)
    kv_usage: F64
    kv_allocation: F64
    remote: F64  # NUMA remote-access ratio of the rank's host side
    misplaced: F64  # 1 where the rank's process runs on the other socket from its GPU

    @property
    def tp(self) -> int:
        return int(self.device.shape[1])

    def __len__(self) -> int:
        return int(self.arrive.shape[0])

    @staticmethod
    def of(e: EngineRequests, invocations: Invocations) -> EngineView:
        r = e.requests
        s = r.signals
        sub = {(x.name, x.rank): x for x in r.sub}
        tp = r.device_s.shape[1]
        model_s = np.maximum(np.nan_to_num(s[Signal.PREFILL_TIME] + s[Signal.DECODE_TIME]), _MIN_MODEL_S)
        arrive = invocations.start_ns[e.rows]

        def at(seconds: F64) -> I64:
            result: I64 = arrive + np.round(seconds * 1e9).astype(np.int64)
            return result

        entered = s[Signal.TIME_TO_FIRST_TOKEN] - s[Signal.PREFILL_TIME]

        def ranks(name: str, signal: Signal | None = None) -> F64:
            columns = [sub[(name, k)].signals[signal] if signal else sub[(name, k)].duration_s for k in range(tp)]
            return np.stack(columns, axis=1)

        return EngineView(
            arrive=arrive,
            queued=at(s[Signal.QUEUE_TIME]),
            model=at(entered),
            first_token=at(s[Signal.TIME_TO_FIRST_TOKEN]),
            done=at(entered + model_s),
            end=invocations.end_ns[e.rows],
            model_s=model_s,
            tokens_in=s[Signal.INPUT_TOKENS],
            tokens_out=s[Signal.OUTPUT_TOKENS],
            collective_bytes=sub[("nccl:AllReduce", 0)].signals[Signal.NCCL_BYTES],
            device=np.clip(r.device_s / model_s[:, None], 0.0, 1.0),
            wait=np.clip(ranks("nccl:AllReduce") / model_s[:, None], 0.0, 1.0),
            dram=ranks("model_forward", Signal.GPU_DRAM_UTILIZATION),
            kv_usage=ranks("model_forward", Signal.KV_USAGE),
            kv_allocation=ranks("model_forward", Signal.KV_BLOCK_ALLOCATION_RATE),
            remote=ranks("sampling", Signal.NUMA_REMOTE_RATIO),
            misplaced=ranks("sampling", Signal.NUMA_MISMATCH),
        )

    def weights(self, bounds_ns: I64) -> tuple[F64, F64]:
        """Each request's seconds in the model within each interval (requests, intervals), and
        the intervals' lengths in seconds."""
        return overlap_s(self.model, self.done, bounds_ns), np.diff(bounds_ns) / 1e9

    @staticmethod
    def mean(weights: F64, values: F64) -> F64:
        """Per interval, the in-model-time-weighted mean of per-request `values` ((requests,) or
        (requests, ranks)); NaN where no request was in the model."""
        total = weights.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            result: F64 = (weights.T @ values) / (total[:, None] if values.ndim == 2 else total)
        return result
