"""`rca.ranking.causes.from_columns`: causes and evidence made a column at a time are the objects
their `__init__` makes, and stay frozen; columns that do not fit the fields are refused."""

from __future__ import annotations

import dataclasses

import pytest

from rca.ranking.causes import Cause, Evidence, SimultaneousRoot, from_columns
from rca.telemetry.faults import Fault


def test_objects_made_from_columns_equal_those_made_one_by_one() -> None:
    shown = (Evidence("self_time_s:Charge", 0.2, 0.01, 6.5),)
    columns = {
        "rank": [1, 2],
        "node": ["payment", "gpu:h1/0"],
        "service": ["payment", "vllm-worker-0"],
        "fault": [Fault.LATENCY, Fault.GPU_MEMORY_BANDWIDTH],
        "probability": [0.75, 0.25],
        "evidence": [shown, ()],
        "path": [("payment", "checkout"), ("gpu:h1/0", "vllm-worker-0", "router")],
    }
    made = from_columns(Cause, columns)
    one_by_one = [Cause(*values) for values in zip(*columns.values(), strict=True)]
    assert made == one_by_one and [hash(c) for c in made] == [hash(c) for c in one_by_one]
    assert repr(made[0]) == repr(one_by_one[0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        made[0].probability = 1.0  # type: ignore[misc]
    signals = from_columns(Evidence, {"signal": ["a"], "observed": [1.0], "baseline": [2.0], "score": [3.0]})
    assert signals == [Evidence("a", 1.0, 2.0, 3.0)]
    assert from_columns(SimultaneousRoot, {"node": [], "service": [], "fault": [], "probability": []}) == []


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ({"signal": ["a"], "observed": [1.0], "baseline": [2.0]}, "takes the columns"),
        ({"signal": ["a"], "observed": [1.0], "baseline": [2.0], "score": [3.0], "x": [0]}, "takes the columns"),
        ({"signal": ["a", "b"], "observed": [1.0], "baseline": [2.0], "score": [3.0]}, "'observed' has 1 values"),
    ],
)
def test_columns_that_do_not_fit_the_fields_are_refused(columns: dict[str, list[object]], message: str) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        from_columns(Evidence, columns)


def test_a_dataclass_without_slots_is_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class Plain:
        signal: str

    with pytest.raises(TypeError, match="Plain is not a slotted dataclass"):
        from_columns(Plain, {"signal": ["a"]})
