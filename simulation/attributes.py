"""Span attributes a real deployment sets beyond the signals a `SpanBatch` holds (docs/interface.md,
LLM-serving spans): each NCCL span's communicator (`nccl.comm_id`, one per engine replica), rank, op and,
for point-to-point sends, peer rank; the request attributes vLLM sets on its `llm_request` spans
in the real-deployment style (`RequestAttributes`); and which of the interface's equivalent
spellings the case's profile uses (`gen_ai.usage.prompt_tokens` or `input_tokens`, an
`x-priority` header or `gen_ai.request.priority`). `rca simulate` writes them into its trace files."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import numpy.typing as npt

from rca.telemetry.conventions import PRIORITY_HEADER, PRIORITY_LEVEL

_TOKEN_NAMES = {
    "gen_ai.usage.input_tokens": "gen_ai.usage.prompt_tokens",
    "gen_ai.usage.output_tokens": "gen_ai.usage.completion_tokens",
}
Value = str | int | float | tuple[str, ...]


@dataclass(frozen=True, slots=True)
class NcclSpans:
    """Rows of NCCL spans: span id, communicator and op (indices into their tables), rank, and
    the peer rank of a point-to-point op (-1 for collectives)."""

    span_id: npt.NDArray[np.uint64]
    comm: npt.NDArray[np.int64]
    op: npt.NDArray[np.int64]
    rank: npt.NDArray[np.int64]
    peer_rank: npt.NDArray[np.int64]

    @staticmethod
    def concat(parts: list[NcclSpans]) -> NcclSpans:
        if not parts:
            empty = np.zeros(0, np.int64)
            return NcclSpans(np.zeros(0, np.uint64), empty, empty, empty, empty)
        return NcclSpans(*(np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(NcclSpans)))


@dataclass(frozen=True, slots=True)
class RequestAttributes:
    """vLLM's own attributes of its `llm_request` spans beyond the signals, by span id (sorted):
    request id, inference time, and the request parameters vLLM records only when set (a
    `max_tokens` of 0, a `temperature` of 0 and a `top_p` of 0 are left out, as vLLM does)."""

    span_id: npt.NDArray[np.uint64]
    request_id: tuple[str, ...]
    inference_s: npt.NDArray[np.float64]
    max_tokens: npt.NDArray[np.int64]
    temperature: npt.NDArray[np.float64]
    top_p: npt.NDArray[np.float64]

    def of(self, span_id: int) -> dict[str, Value]:
        i = int(np.searchsorted(self.span_id, np.uint64(span_id)))
        if i >= self.span_id.shape[0] or int(self.span_id[i]) != span_id:
            return {}
        out: dict[str, Value] = {
            "gen_ai.latency.time_in_model_inference": float(self.inference_s[i]),
            "gen_ai.request.id": self.request_id[i],
            "gen_ai.request.n": 1,
        }
        if self.max_tokens[i]:
            out["gen_ai.request.max_tokens"] = int(self.max_tokens[i])
        if self.temperature[i]:
            out["gen_ai.request.temperature"] = float(self.temperature[i])
        if self.top_p[i]:
            out["gen_ai.request.top_p"] = float(self.top_p[i])
        return out


@dataclass(frozen=True, slots=True)
class SpanAttributes:
    nccl: NcclSpans  # sorted by span id
    comm_ids: tuple[str, ...]
    ops: tuple[str, ...]
    prompt_tokens: bool  # spell token counts gen_ai.usage.prompt_tokens / completion_tokens
    priority_header: bool  # mark urgency with the x-priority header, not gen_ai.request.priority
    requests: RequestAttributes | None = None  # vLLM's request attributes (the real-deployment style)

    @staticmethod
    def of(
        nccl: NcclSpans, comm_ids: tuple[str, ...], ops: tuple[str, ...], tokens: str, priority: str
    ) -> SpanAttributes:
        """`nccl`'s rows (any order), their tables, and a profile's encodings (`profiles.Profile`)."""
        order = np.argsort(nccl.span_id)
        rows = NcclSpans(*(getattr(nccl, f.name)[order] for f in fields(NcclSpans)))
        return SpanAttributes(rows, comm_ids, ops, tokens == "prompt_tokens", priority == "header")

    def extra(self, span_id: int) -> dict[str, Value]:
        """The NCCL or vLLM request attributes of the span `span_id` (none for other spans)."""
        i = int(np.searchsorted(self.nccl.span_id, np.uint64(span_id)))
        if i >= self.nccl.span_id.shape[0] or int(self.nccl.span_id[i]) != span_id:
            return {} if self.requests is None else self.requests.of(span_id)
        out: dict[str, Value] = {
            "nccl.comm_id": self.comm_ids[int(self.nccl.comm[i])],
            "nccl.op": self.ops[int(self.nccl.op[i])],
            "nccl.rank": int(self.nccl.rank[i]),
        }
        if self.nccl.peer_rank[i] >= 0:
            out["nccl.peer_rank"] = int(self.nccl.peer_rank[i])
        return out

    def spelling(self, key: str) -> str:
        """An attribute's name as this case's deployment spells it: token counts under their
        older names, urgency as a captured `x-priority` header."""
        if self.prompt_tokens and key in _TOKEN_NAMES:
            return _TOKEN_NAMES[key]
        return PRIORITY_HEADER if self.priority_header and key == PRIORITY_LEVEL else key

    @staticmethod
    def header(level: int) -> tuple[str, ...]:
        """The `x-priority` header of a `gen_ai.request.priority` level (0 is urgent)."""
        return ("high",) if level <= 0 else ("normal",)
