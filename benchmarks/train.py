"""Fits the shipped health parameters (`models/params.json`) on simulated training cases
(`models.training`); the benchmark scores other seeds, so its figures are held-out figures."""

from __future__ import annotations

import sys

from models.fitting import calibration
from models.health import SHIPPED, HealthParams, save_params
from models.ranker import BayesianRanker
from models.training import training_cases


def main() -> int:
    cases = training_cases()
    params = BayesianRanker(params=HealthParams()).fit(cases).params_
    save_params(params, SHIPPED)
    fit = calibration(cases, params)
    print(
        f"fitted on {fit.cases} cases: mean top-1 probability {fit.mean_top1_probability:.2f}, "
        f"top-1 accuracy {fit.top1_accuracy:.2f}; wrote {SHIPPED}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
