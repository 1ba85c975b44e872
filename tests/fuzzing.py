"""What the decoder fuzz tests share: hypothesis settings, byte-level mutations of seed requests,
decoding that may refuse (with a reason) but never fail otherwise, protobuf varints, and running
the wire scanners' kernels with numba's bounds checking."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
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


def garbled(draw: st.DataObject, data: bytes) -> tuple[bytes, bytes]:
    """`data` with a few random bytes appended and one to four bytes overwritten; and that cut at a
    random length."""
    mutated = bytearray(data + draw.draw(st.binary(max_size=4)))
    for _ in range(draw.draw(st.integers(1, 4))):
        if mutated:
            mutated[draw.draw(st.integers(0, len(mutated) - 1))] = draw.draw(st.integers(0, 255))
    return bytes(mutated), bytes(mutated[: draw.draw(st.integers(0, len(mutated)))])


def varint(n: int) -> bytes:
    """A protobuf base-128 varint."""
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


ROOT = Path(__file__).resolve().parents[1]
_BOUNDS_CHECKING_ON = """
import sys
import numpy as np
from numba import njit

@njit
def past_the_end(a):
    return a[a.shape[0]]

try:
    past_the_end(np.zeros(1, np.uint8))
    sys.exit("numba bounds checking is off")
except IndexError:
    pass
"""


def run_bounds_checked(script: str, cache: Path) -> str:
    """Runs `script` in a fresh Python with numba's bounds checking on and an empty numba cache in
    `cache` (so that nothing compiled without the checks is reused): an index past an array's end
    raises IndexError there and fails the caller. Returns what the script printed."""
    env = {**os.environ, "NUMBA_BOUNDSCHECK": "1", "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", _BOUNDS_CHECKING_ON + script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0 and "IndexError" not in done.stderr, done.stderr[-4000:]
    return done.stdout
