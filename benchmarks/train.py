"""Fits the shipped health parameters (`models/params.json`) on simulated training cases
(`models.training`) with the Pyro fit (`models.learning`); the benchmark scores other seeds, so
its figures are held-out figures. `--out FILE` writes elsewhere."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from models.fitting import calibration
from models.health import SHIPPED, HealthParams, save_params
from models.ranker import BayesianRanker
from models.training import training_cases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=SHIPPED, help="where to write the parameters")
    out: Path = parser.parse_args(argv).out
    began = time.perf_counter()
    cases = training_cases()
    simulated = time.perf_counter()
    params = BayesianRanker(params=HealthParams()).fit(cases).params_
    fitted = time.perf_counter()
    save_params(params, out)
    fit = calibration(cases, params)
    print(
        f"{len(cases)} cases simulated in {simulated - began:.0f} s, fitted in {fitted - simulated:.0f} s "
        f"(temperature {params.temperature:.2f}); on {fit.cases} of them: mean top-1 probability "
        f"{fit.mean_top1_probability:.2f}, top-1 accuracy {fit.top1_accuracy:.2f}; wrote {out}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
