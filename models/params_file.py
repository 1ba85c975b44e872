"""A health-parameters file read for use (`rca serve --params`), every fault in it one ValueError."""

from __future__ import annotations

import math
from pathlib import Path

from models.health import N_RELATIONS, HealthParams, load_params
from rca.evidence.nodes import N_COLUMNS, N_FAULTS

_POSITIVE = ("healthy_scale", "tail_mean", "fault_scale")
_WEIGHTS = ("tail_weight",)
_MATRICES = {"activation": N_FAULTS, "relation_weight": N_RELATIONS, "relation_loc": N_RELATIONS}


def _check(params: HealthParams) -> None:
    for name in (*_POSITIVE, *_WEIGHTS, "fault_loc"):
        values = getattr(params, name)
        if len(values) != N_COLUMNS:
            raise ValueError(f"{name} has {len(values)} values, not one per evidence column ({N_COLUMNS})")
    for name in ("class_rate", "stall_rate"):
        values = getattr(params, name)
        if len(values) != N_FAULTS:
            raise ValueError(f"{name} has {len(values)} values, not one per fault class ({N_FAULTS})")
    for name, rows in _MATRICES.items():
        matrix = getattr(params, name)
        if len(matrix) != rows or any(len(row) != N_COLUMNS for row in matrix):
            raise ValueError(f"{name} must be {rows} rows of {N_COLUMNS} values")
    every = [x for name in ("fault_loc", "relation_loc") for x in _flat(getattr(params, name))]
    if not all(math.isfinite(x) for x in every):
        raise ValueError("fault_loc and relation_loc must be finite")
    if not all(0.0 < x < math.inf for name in _POSITIVE for x in getattr(params, name)):
        raise ValueError(f"{', '.join(_POSITIVE)} must be positive and finite")
    weights = [*params.tail_weight, *_flat(params.activation), *_flat(params.relation_weight)]
    if not all(0.0 <= x <= 1.0 for x in weights):
        raise ValueError("tail_weight, activation and relation_weight must lie in [0, 1]")
    if not all(0.0 < x < 1.0 for x in params.stall_rate):
        raise ValueError("stall_rate must lie in (0, 1)")
    if not 0.0 < params.temperature < math.inf:
        raise ValueError(f"temperature must be positive and finite, not {params.temperature}")


def _flat(value: tuple[float, ...] | tuple[tuple[float, ...], ...]) -> list[float]:
    return [x for row in value for x in (row if isinstance(row, tuple) else (row,))]


def read_params(path: Path) -> HealthParams:
    """The parameters in `path` (as `rca fit` writes them); ValueError saying what is wrong."""
    try:
        params = load_params(path)
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot read it: {exc.strerror}") from None
    except (KeyError, TypeError, ValueError) as exc:  # not JSON, a key missing, a value not a number
        reason = f"the key {exc} is missing" if isinstance(exc, KeyError) else str(exc)
        raise ValueError(f"{path}: not a health-parameters file: {reason}") from None
    try:
        _check(params)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    return params
