"""The held-out evaluation in process: `python -m benchmarks.heldout [--profile default|shifted]
[--style conventions|real] [--seeds 101,102,103 | 101-120] [--scenarios PREFIX] [--params FILE]
[--llm-score-scale F] [--replica-names distinct|shared] [--several-replicas] [--json FILE]`.

Each simulated scenario of the benchmark (`SIM_SCENARIOS`; with `--style real` the `real` suite's,
`REAL_SCENARIOS`, as a real deployment emits them) at each held-out seed is turned into
the evidence rca sees a minute past its first alert (`models.training.simulated_case`) and ranked
with the shipped parameters (or `--params`), without the service around it. Scored as `rca
bench` scores (`benchmarks.accuracy`): AC@k over the ranked services, duplicates dropped; fault@1
the share whose top cause has a true class; node@1 the share whose top cause is a root's own node
(its GPU, host or network where the fault lives there, not only its service); an overlapping-fault
(`*-double`) case counts a hit where the top cause is either root. Cases are grouped by the true
(primary) fault class, and each group's mean top-1 probability is set beside its AC@1: calibrated,
they agree. `--llm-score-scale F` multiplies every node's LLM-serving class scores by F before
ranking (a test statistic grows with the square root of its samples: F = 0.3 reads a deployment
with a tenth of the simulator's samples, or a subtler fault): how the ranking holds when the
evidence is fainter than anything the fit saw. `--replica-names shared` exports an LLM
deployment's engine replicas under one set of service names, as one Deployment's pods
(`simulation.replica_names`); `--several-replicas` scores only the cases whose drawn layout has
more than one replica (the others are the same either way).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmarks.accuracy import _position, calibration_line
from benchmarks.cases import HELD_OUT_SEEDS, REAL_SCENARIOS, SIM_SCENARIOS, case_name
from models.health import LLM_FAULTS, HealthParams, load_params, params_version
from models.params_file import read_params
from models.ranker import BayesianRanker
from models.training import simulated_case
from rca.evidence.nodes import WAIT, F, NodeEvidence
from rca.telemetry.faults import Fault
from simulation.profiles import PROFILES
from simulation.real_style import STYLES
from simulation.replica_names import REPLICA_NAMES

SIGNALS_SHOWN = 2  # a miss shows its top cause's strongest signals


@dataclass(frozen=True, slots=True)
class Scored:
    """One case's outcome: where the truth came (None: not ranked) and what came first."""

    case: str
    fault: str  # the true class (of the primary root)
    truth: tuple[str, ...]  # the root services: two where faults overlap
    place: int | None
    node_hit: bool  # the top cause is a root's node
    fault_hit: bool  # the top cause has a root's class
    probability: float  # the top cause's; 0 where nothing was ranked
    top_node: str | None
    top_fault: str | None
    signals: tuple[str, ...]  # the top cause's strongest anomalous signals, strongest first
    layout: str = ""  # the LLM deployment drawn (`tp{degree}x{replicas}`); empty elsewhere

    @property
    def replicas(self) -> int:
        """The engine replicas of the case's LLM deployment (0 for other topologies)."""
        return int(self.layout.rpartition("x")[2]) if self.layout else 0


def llm_scores_scaled(evidence: NodeEvidence, scale: float) -> NodeEvidence:
    """`evidence` with every node's LLM-serving class scores (and collective waits) multiplied by `scale`."""
    if scale == 1.0:
        return evidence
    score = evidence.score.copy()
    score[:, [*(F[fault] for fault in LLM_FAULTS), WAIT]] *= scale
    return dataclasses.replace(evidence, score=score)


def score_case(
    ranker: BayesianRanker,
    scenario: str,
    seed: int,
    profile: str = "default",
    style: str = "conventions",
    llm_score_scale: float = 1.0,
    replica_names: str = "distinct",
) -> Scored:
    """The case's ranking by `ranker` (its LLM-serving scores times `llm_score_scale`), scored
    against every root of its truth."""
    (evidence, alerts, _, _), truth = simulated_case(
        scenario, seed, profile=profile, style=style, replica_names=replica_names
    )
    causes = ranker.causes(llm_scores_scaled(evidence, llm_score_scale), alerts)
    services = [c.service for c in causes]
    top = causes[0] if causes else None
    strongest = sorted((e for e in top.evidence if e.score > 0), key=lambda e: -e.score) if top else []
    return Scored(
        case=case_name(scenario, seed, profile, style) + ("" if replica_names == "distinct" else f"+{replica_names}"),
        fault=truth.fault,
        truth=tuple(dict.fromkeys(r.service for r in truth.roots)),
        place=_position(services, [r.service for r in truth.roots]),
        node_hit=top is not None and top.node in {r.node for r in truth.roots},
        fault_hit=top is not None and top.fault in {r.fault for r in truth.roots},
        probability=top.probability if top else 0.0,
        top_node=top.node if top else None,
        top_fault=str(top.fault) if top else None,
        signals=tuple(
            f"{e.signal} {e.observed:.3g} vs {e.baseline:.3g} (score {e.score:.1f})" for e in strongest[:SIGNALS_SHOWN]
        ),
        layout=truth.layout,
    )


def evaluate(
    scenarios: Sequence[str],
    seeds: Sequence[int],
    profile: str = "default",
    params: HealthParams | None = None,
    style: str = "conventions",
    llm_score_scale: float = 1.0,
    replica_names: str = "distinct",
) -> list[Scored]:
    """Every (seed, scenario) case scored, seed by seed, with `params` (default: the shipped)."""
    ranker = BayesianRanker(params=params or load_params())
    return [
        score_case(ranker, scenario, seed, profile, style, llm_score_scale, replica_names)
        for seed in seeds
        for scenario in scenarios
    ]


def summary(scored: Sequence[Scored]) -> dict[str, float]:
    """cases, AC@1, AC@3, node@1, fault@1 and the mean top-1 probability of a group of cases."""
    if not scored:
        raise ValueError("no cases to summarise")
    n = len(scored)
    return {
        "cases": n,
        "AC@1": sum(s.place == 1 for s in scored) / n,
        "AC@3": sum(s.place is not None and s.place <= 3 for s in scored) / n,
        "node@1": sum(s.node_hit for s in scored) / n,
        "fault@1": sum(s.fault_hit for s in scored) / n,
        "mean_top1_probability": sum(s.probability for s in scored) / n,
    }


def by_class(scored: Sequence[Scored]) -> dict[str, dict[str, float]]:
    """`summary` per true fault class, in the vocabulary's order, then "all"."""
    classes = [str(f) for f in Fault if any(s.fault == f for s in scored)]
    return {c: summary([s for s in scored if s.fault == c]) for c in classes} | {"all": summary(scored)}


def report(scored: Sequence[Scored], title: str) -> str:
    """The per-class table, the calibration line and the misses, as printed."""
    table = by_class(scored)
    lines = [
        title,
        "",
        "| class | cases | AC@1 | AC@3 | node@1 | fault@1 | mean p@1 |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, m in table.items():
        lines.append(
            f"| {name} | {m['cases']} | {m['AC@1']:.2f} | {m['AC@3']:.2f} | {m['node@1']:.2f} | {m['fault@1']:.2f} "
            f"| {m['mean_top1_probability']:.2f} |"
        )
    p, ac, node = table["all"]["mean_top1_probability"], table["all"]["AC@1"], table["all"]["node@1"]
    # the probability is the top node's: against node@1 it is the node's own calibration
    lines += ["", f"calibration: {calibration_line(p, ac)}; {calibration_line(p, node, 'node@1')}"]
    misses = [s for s in scored if s.place != 1]
    if misses:
        lines += ["", "misses (place of the truth among the ranked services):"]
        lines += [
            f"- {s.case} ({s.fault}): truth {'/'.join(s.truth)} at {s.place or 'none'}; top {s.top_node} "
            f"({s.top_fault}, p {s.probability:.2f}): {'; '.join(s.signals) or 'no anomalous signal'}"
            for s in misses
        ]
    return "\n".join(lines)


def _seeds(text: str) -> tuple[int, ...]:
    """`101,102,103` or `101-120` (inclusive), or both mixed: `101-103,110`."""
    seeds: list[int] = []
    for part in text.split(","):
        first, dash, last = part.partition("-")
        try:
            span = range(int(first), int(last if dash else first) + 1)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"seeds are integers or ranges a-b, comma-separated: not {text!r}"
            ) from None
        if not span:
            raise argparse.ArgumentTypeError(f"seed range {part!r} is empty")
        seeds += span
    return tuple(seeds)


def _scale(text: str) -> float:
    try:
        scale = float(text)
    except ValueError:
        scale = -1.0
    if not 0.0 < scale <= 1.0:
        raise argparse.ArgumentTypeError(f"the LLM score scale must be a number in (0, 1], not {text!r}")
    return scale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.heldout", description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", choices=tuple(PROFILES), default="default", help="the simulator's profile")
    parser.add_argument("--style", choices=STYLES, default=STYLES[0], help="what the telemetry looks like")
    parser.add_argument(
        "--seeds", type=_seeds, default=HELD_OUT_SEEDS, help="comma-separated, ranges a-b (default 101,102,103)"
    )
    parser.add_argument("--scenarios", default="", metavar="PREFIX", help="only the scenarios named so")
    parser.add_argument("--params", type=Path, help="health parameters (default: the shipped)")
    parser.add_argument(
        "--llm-score-scale", type=_scale, default=1.0, metavar="F", help="LLM-serving class scores times F (default 1)"
    )
    parser.add_argument(
        "--replica-names", choices=REPLICA_NAMES, default="distinct", help="engine replicas' service names"
    )
    parser.add_argument(
        "--several-replicas", action="store_true", help="only cases whose LLM deployment has several replicas"
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the table and every case here")
    args = parser.parse_args(argv)
    known = REAL_SCENARIOS if args.style == "real" else SIM_SCENARIOS
    scenarios = tuple(s for s in known if s.startswith(args.scenarios))
    if not scenarios:
        print(f"heldout: no scenario starts with {args.scenarios!r}; known: {', '.join(known)}", file=sys.stderr)
        return 2
    try:
        params = read_params(args.params) if args.params else load_params()
    except ValueError as exc:
        print(f"heldout: {exc}", file=sys.stderr)
        return 2
    scored = evaluate(scenarios, args.seeds, args.profile, params, args.style, args.llm_score_scale, args.replica_names)
    if args.several_replicas:
        scored = [s for s in scored if s.replicas > 1]
    if not scored:
        print(
            "heldout: no case left to score (--several-replicas keeps LLM deployments of 2+ replicas)", file=sys.stderr
        )
        return 2
    named = f"{args.params}" if args.params else "shipped"
    title = (
        f"held-out evaluation: profile {args.profile}{'' if args.style == STYLES[0] else f', style {args.style}'}, "
        f"seeds {','.join(map(str, args.seeds))}, "
        f"{'' if args.llm_score_scale == 1.0 else f'LLM scores x{args.llm_score_scale:g}, '}"
        f"{'' if args.replica_names == 'distinct' else f'replica names {args.replica_names}, '}"
        f"{'several replicas only, ' if args.several_replicas else ''}"
        f"{len(scored)} cases ({len(scenarios)} scenarios), parameters {named} ({params_version(params)})"
    )
    print(report(scored, title))
    if args.json:
        out = {
            "profile": args.profile,
            "style": args.style,
            "seeds": list(args.seeds),
            "scenarios": list(scenarios),
            "params": params_version(params),
            "llm_score_scale": args.llm_score_scale,
            "replica_names": args.replica_names,
            "several_replicas": args.several_replicas,
            "classes": by_class(scored),
            "per_case": [asdict(s) for s in scored],
        }
        args.json.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
