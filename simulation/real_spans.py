"""The real-deployment style's spans: what vLLM V1 emits, not rca's own conventions (docs/interface.md).

vLLM V1 traces one `llm_request` SERVER span per request (its output processor's `do_tracing`):
time to first token, e2e, time in queue, in model prefill, decode and inference, prompt and
completion token counts, the request id, and the request parameters it was given (max_tokens,
temperature, top_p, n). It has no scheduler time, no request priority, and its tensor-parallel
workers trace nothing: no `model_forward`, `nccl:*` or `sampling` spans, no GPU, KV-cache or NUMA
attributes. The other services' spans are kept as they are; where they capture the request's
`x-priority` header (a drawn share of deployments), the caller's span marks the request's urgency.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

import numpy as np

from rca.telemetry.spans import KIND_SERVER, Signal, SpanBatch
from simulation.attributes import RequestAttributes

LLM_REQUEST = "llm_request"
# the signals vLLM's `llm_request` attributes carry (read back by rca's LLM-serving span mapping)
VLLM_SIGNALS = (
    Signal.QUEUE_TIME,
    Signal.TIME_TO_FIRST_TOKEN,
    Signal.E2E_LATENCY,
    Signal.PREFILL_TIME,
    Signal.DECODE_TIME,
    Signal.INPUT_TOKENS,
    Signal.OUTPUT_TOKENS,
)
_MAX_TOKENS = np.array([256, 512, 1024, 2048, 4096, 8192])
_TEMPERATURES = np.array([0.0, 0.2, 0.6, 0.7, 1.0])  # 0: greedy, which vLLM does not record
_TOP_P = np.array([0.8, 0.9, 0.95, 1.0])


def vllm_spans(batch: SpanBatch, workers: Collection[str], *, priority_header: bool) -> SpanBatch:
    """`batch` without the `workers`' spans, every signal but vLLM's cleared; with
    `priority_header`, each request's urgency marked on its caller's span (the `x-priority` header
    it captured), since vLLM's own span records none."""
    worker = np.isin(batch.service, [i for i, s in enumerate(batch.strings) if s in workers])
    kept = batch.select(~worker)
    signals = np.full_like(kept.signals, np.nan)
    columns = list(VLLM_SIGNALS)
    signals[:, columns] = kept.signals[:, columns]
    if priority_header:
        marked = ~np.isnan(kept.signals[:, Signal.URGENT])
        urgent = kept.signals[:, Signal.URGENT] == 1.0
        order = np.argsort(kept.span_id)
        at = np.searchsorted(kept.span_id[order], kept.parent_id[marked])
        at = np.minimum(at, order.shape[0] - 1)
        found = kept.span_id[order[at]] == kept.parent_id[marked]
        signals[order[at[found]], Signal.URGENT] = urgent[marked][found].astype(np.float64)
    return replace(kept, signals=signals)


def request_attributes(batch: SpanBatch, rng: np.random.Generator) -> RequestAttributes:
    """vLLM's attributes of every `llm_request` span of `batch`: a `chatcmpl-` id, the inference
    time (prefill and decode), and the request's parameters: `max_tokens` set on most requests to
    a round value at least its completion, temperature and top_p as clients send them."""
    named = [i for i, s in enumerate(batch.strings) if s == LLM_REQUEST]
    rows = np.flatnonzero(np.isin(batch.operation, named) & (batch.kind == KIND_SERVER))  # not the callers' spans
    order = rows[np.argsort(batch.span_id[rows])]
    n = order.shape[0]
    ids = rng.integers(0, np.iinfo(np.uint64).max, (n, 2), dtype=np.uint64, endpoint=True)
    signals = batch.signals[order]
    completion = np.nan_to_num(signals[:, Signal.OUTPUT_TOKENS])
    least = np.searchsorted(_MAX_TOKENS, completion)  # the first round value not below the completion
    pick = np.minimum(least + rng.integers(0, 3, n), _MAX_TOKENS.shape[0] - 1)
    max_tokens = np.where(rng.random(n) < 0.7, _MAX_TOKENS[pick], 0)
    return RequestAttributes(
        span_id=batch.span_id[order],
        request_id=tuple(f"chatcmpl-{int(a):016x}{int(b):016x}" for a, b in ids.tolist()),
        inference_s=signals[:, Signal.PREFILL_TIME] + signals[:, Signal.DECODE_TIME],
        max_tokens=max_tokens.astype(np.int64),
        temperature=_TEMPERATURES[rng.integers(0, _TEMPERATURES.shape[0], n)],
        top_p=_TOP_P[rng.integers(0, _TOP_P.shape[0], n)],
    )
