"""What the decoder fuzz tests share: hypothesis settings, byte-level mutations of seed requests,
decoding that may refuse (with a reason) but never fail otherwise, and protobuf varints."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from rca.telemetry.spans import DecodeError

R = TypeVar("R")
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def decode_or_refuse(decode: Callable[[Any], R], data: object) -> R | None:
    """`decode(data)`, or None where it raised `DecodeError` (whose message must say why)."""
    try:
        return decode(data)
    except DecodeError as exc:
        assert str(exc)  # refusals say why
        return None


@st.composite
def mutated(draw: st.DrawFn, seeds: tuple[bytes, ...]) -> bytes:
    """A seed with a few byte-level edits."""
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        edit = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "splice"]))
        if edit == "flip" and at < len(data):
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif edit == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif edit == "delete":
            del data[at : at + draw(st.integers(1, 16))]
        elif edit == "truncate":
            del data[at:]
        else:
            other = draw(st.sampled_from(seeds))
            data[at:] = other[draw(st.integers(0, len(other))) :]
    return bytes(data)


def varint(n: int) -> bytes:
    """A protobuf base-128 varint."""
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)
