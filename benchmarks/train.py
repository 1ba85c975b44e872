"""Fits the shipped health parameters (`models/params.json`) on simulated training cases
(`models.training`) with the Pyro fit (`models.learning`), its temperature set on calibration
cases of other seeds; the benchmark scores seeds apart from both, so its figures are held-out
figures. `--out FILE` writes elsewhere."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from models.fitting import calibration
from models.health import SHIPPED, HealthParams, save_params
from models.ranker import BayesianRanker
from models.training import calibration_cases, training_cases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=SHIPPED, help="where to write the parameters")
    out: Path = parser.parse_args(argv).out
    began = time.perf_counter()
    cases, held_apart = training_cases(), calibration_cases()
    simulated = time.perf_counter()
    params = BayesianRanker(params=HealthParams()).fit(cases, held_apart).params_
    fitted = time.perf_counter()
    save_params(params, out)
    fit, apart = calibration(cases, params), calibration(held_apart, params)
    print(
        f"{len(cases)} training and {len(held_apart)} calibration cases simulated in {simulated - began:.0f} s, "
        f"fitted in {fitted - simulated:.0f} s (temperature {params.temperature:.2f}); mean top-1 probability "
        f"against top-1 accuracy: {fit.mean_top1_probability:.2f} / {fit.top1_accuracy:.2f} on {fit.cases} "
        f"training cases, {apart.mean_top1_probability:.2f} / {apart.top1_accuracy:.2f} on {apart.cases} "
        f"calibration cases; wrote {out}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
