"""422 answers that can always be written: FastAPI's own shape (`{"detail": [{"loc", "msg",
"input", ...}]}`), with the echoed input made JSON-safe. Python's parser reads `NaN` and
`Infinity` in bodies; echoing them back verbatim would fail to serialise and become a 500."""

from __future__ import annotations

import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse


def json_safe(value: Any) -> Any:
    """`value` with every non-finite float replaced by its text (`"nan"`, `"inf"`, `"-inf"`)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    return value


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return JSONResponse(status_code=422, content={"detail": json_safe(jsonable_encoder(exc.errors()))})


def safe_validation_errors(app: FastAPI) -> None:
    """Answers request validation errors with JSON that always serialises."""
    app.add_exception_handler(RequestValidationError, _validation_error)
