"""A `Ranking` as plain JSON values and back, exactly (the database keeps rankings this way)."""

from __future__ import annotations

from typing import Any

from rca.ranking import Cause, Evidence, Fault, Ranking


def ranking_to_json(ranking: Ranking) -> dict[str, Any]:
    return {
        "start_ns": ranking.start_ns,
        "end_ns": ranking.end_ns,
        "model": ranking.model,
        "inference_ms": ranking.inference_ms,
        "onset_ns": ranking.onset_ns,
        "causes": [
            {
                "rank": c.rank,
                "node": c.node,
                "service": c.service,
                "fault": c.fault.value,
                "probability": c.probability,
                "evidence": [[e.signal, e.observed, e.baseline, e.score] for e in c.evidence],
                "path": list(c.path),
            }
            for c in ranking.causes
        ],
    }


def ranking_from_json(data: dict[str, Any], top: int | None = None) -> Ranking:
    """The ranking, with only its first `top` causes when given (summaries need no more)."""
    return Ranking(
        start_ns=int(data["start_ns"]),
        end_ns=int(data["end_ns"]),
        model=str(data["model"]),
        inference_ms=float(data["inference_ms"]),
        onset_ns=None if data["onset_ns"] is None else int(data["onset_ns"]),
        causes=tuple(
            Cause(
                rank=int(c["rank"]),
                node=str(c["node"]),
                service=str(c["service"]),
                fault=Fault(c["fault"]),
                probability=float(c["probability"]),
                evidence=tuple(Evidence(str(s), float(o), float(b), float(x)) for s, o, b, x in c["evidence"]),
                path=tuple(str(p) for p in c["path"]),
            )
            for c in data["causes"][:top]
        ),
    )
