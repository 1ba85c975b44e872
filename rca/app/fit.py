"""`rca fit`: reads responders' labels from the database, refits the health model on them and the
simulated training cases (`models.refit`), and writes the parameters for `rca serve --params`."""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TextIO

from models.health import HealthParams, load_params, save_params
from models.refit import fit_labelled
from models.training import TRAINING_SCENARIOS, TRAINING_SEEDS, calibration_cases, training_cases
from storage.sql import SqlIncidentStore, StoreError

log = logging.getLogger("rca.fit")


def _write(params: HealthParams, out: Path) -> None:
    """Written beside, then moved into place: a reader sees the old file or the new, never half."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.partial")
    save_params(params, partial)
    os.replace(partial, out)


def run_fit(
    db: str,
    out: Path,
    *,
    scenarios: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    stdout: TextIO | None = None,
) -> int:
    """`rca fit`: reads the labels in `db`, simulates the training cases (`scenarios` x `seeds`,
    by default `models.training`'s) and, where there are any, the calibration cases of the same
    scenarios the temperature is set on, fits, writes `out` and prints a one-line JSON summary;
    returns 2 with a message on stderr when the database, the simulation or the fit fails."""
    try:
        store = SqlIncidentStore.open(db, create=False)
        try:
            labelled, unreadable = store.labelled()
        finally:
            store.close()
        for incident, reason in unreadable.items():
            log.warning("the label of incident %s is left out: %s", incident, reason)
        log.info("%d labelled incidents; simulating the training cases", len(labelled))
        scenarios = TRAINING_SCENARIOS if scenarios is None else scenarios
        simulated = training_cases(scenarios, TRAINING_SEEDS if seeds is None else seeds)
        held_apart = calibration_cases(scenarios) if simulated else []
        params, summary = fit_labelled(labelled, simulated, load_params(), held_apart)
        summary = replace(summary, unreadable=len(unreadable))
        _write(params, out)
    except (StoreError, ValueError, OSError) as exc:
        print(f"rca fit: {exc}", file=sys.stderr)
        return 2
    (stdout or sys.stdout).write(json.dumps(summary.json(out)) + "\n")
    return 0
