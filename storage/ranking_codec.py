"""A `Ranking` as bytes and back, exactly (the database keeps rankings this way).

MessagePack via msgspec: the frozen dataclasses are encoded and decoded directly, several times
faster than building and reading dicts (a ranking of a 1000-service graph holds ~1000 causes),
and every float survives, NaN and infinities included (JSON has neither).
"""

from __future__ import annotations

import dataclasses

import msgspec

from rca.ranking.causes import Ranking

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Ranking)


def ranking_to_bytes(ranking: Ranking) -> bytes:
    return _encoder.encode(ranking)


def ranking_from_bytes(data: bytes, top: int | None = None) -> Ranking:
    """The ranking, with only its first `top` causes when given (summaries need no more)."""
    ranking = _decoder.decode(data)
    return ranking if top is None else dataclasses.replace(ranking, causes=ranking.causes[:top])
