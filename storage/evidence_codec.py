"""`NodeEvidence` as JSON text and back, exactly (labelled incidents keep what the model saw).

Names stay JSON lists; every array is its `.npy` bytes in base64, so dtype, shape and every
float (NaN included, which JSON itself cannot hold) come back bit for bit. The fields are read
from the dataclass, so a field added to `NodeEvidence` is carried too; a document that lacks one
(or has one too many) is refused rather than guessed.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import io
import json
from typing import Any

import numpy as np

from rca.evidence.nodes import N_COLUMNS, N_FAULTS, NodeEvidence

FORMAT = 1
_ARRAY_KEY = "npy"


def _encode(value: object) -> object:
    if isinstance(value, np.ndarray):
        buffer = io.BytesIO()
        np.save(buffer, value, allow_pickle=False)
        return {_ARRAY_KEY: base64.b64encode(buffer.getvalue()).decode("ascii")}
    if isinstance(value, tuple):
        return [_encode(item) for item in value]
    return value


def _decode(value: object) -> Any:
    if isinstance(value, dict):
        if set(value) != {_ARRAY_KEY} or not isinstance(value[_ARRAY_KEY], str):
            raise ValueError(f"an array must be {{{_ARRAY_KEY!r}: base64}}, not keys {sorted(value)}")
        data = base64.b64decode(value[_ARRAY_KEY], validate=True)
        return np.load(io.BytesIO(data), allow_pickle=False)
    if isinstance(value, list):
        return tuple(_decode(item) for item in value)
    return value


def evidence_to_json(evidence: NodeEvidence) -> str:
    fields = {f.name: _encode(getattr(evidence, f.name)) for f in dataclasses.fields(NodeEvidence)}
    return json.dumps({"format": FORMAT, **fields}, separators=(",", ":"))


def evidence_from_json(text: str) -> NodeEvidence:
    """The evidence `evidence_to_json` wrote; ValueError saying what is wrong otherwise."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"evidence is not JSON: {exc}") from None
    if not isinstance(document, dict) or document.pop("format", None) != FORMAT:
        raise ValueError(f"evidence is not a format-{FORMAT} NodeEvidence document")
    names = [f.name for f in dataclasses.fields(NodeEvidence)]
    if "lockstep" not in document and isinstance(document.get("nodes"), list):  # stored before GPU groups
        document["lockstep"] = _encode(np.full(len(document["nodes"]), -1, np.int64))
    if "engine" not in document and isinstance(document.get("nodes"), list):  # stored before engines were marked
        document["engine"] = _encode(np.zeros(len(document["nodes"]), np.bool_))
    if set(document) != set(names):
        missing, extra = sorted(set(names) - set(document)), sorted(set(document) - set(names))
        raise ValueError(f"evidence fields differ from NodeEvidence: missing {missing}, unknown {extra}")
    try:
        return _with_every_column(NodeEvidence(**{name: _decode(document[name]) for name in names}))
    except (binascii.Error, OSError, ValueError) as exc:
        raise ValueError(f"evidence holds an unreadable array: {exc}") from None


def _with_every_column(evidence: NodeEvidence) -> NodeEvidence:
    """Evidence stored before the `WAIT` column, with that column unmeasured."""
    if evidence.score.ndim != 2 or evidence.score.shape[1] != N_FAULTS:
        return evidence
    extra = N_COLUMNS - N_FAULTS
    rows = evidence.score.shape[0]

    def padded(array: np.ndarray[Any, Any], fill: object) -> np.ndarray[Any, Any]:
        return np.concatenate([array, np.full((rows, extra), fill, array.dtype)], axis=1)

    return dataclasses.replace(
        evidence,
        score=padded(evidence.score, np.nan),
        observed=padded(evidence.observed, np.nan),
        baseline=padded(evidence.baseline, np.nan),
        onset_ns=padded(evidence.onset_ns, -1),
        signal=tuple((*labels, *([""] * extra)) for labels in evidence.signal),
    )
