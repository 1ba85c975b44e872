"""The `rca` command line (docs/interface.md, Command line)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from rca.app.config import FLAG_METAVARS, FLAG_NAMES, ConfigError, Settings, flag_help, load_settings

DEFAULT_PARAMS_OUT = "./rca-data/params.json"


def _at_least_one(text: str) -> int:
    count = int(text)
    if count < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {count}")
    return count


def _list_of(kind: type[int] | type[str]) -> Callable[[str], tuple[int, ...] | tuple[str, ...]]:
    """Comma-separated values ("" for none); integers must be >= 0."""

    def parse(text: str) -> tuple[int, ...] | tuple[str, ...]:
        parts = [p.strip() for p in text.split(",") if p.strip()]
        if kind is str:
            return tuple(parts)
        if not all(p.isdigit() for p in parts):
            raise argparse.ArgumentTypeError(f"{text!r} is not comma-separated integers >= 0")
        return tuple(int(p) for p in parts)

    return parse


def _fit_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    fit = sub.add_parser("fit", help="re-estimate the health model from labelled incidents and simulated cases")
    fit.add_argument("--db", metavar="URL", help="the incident database (env RCA_DB, default rca serve's)")
    fit.add_argument("--out", metavar="FILE", default=DEFAULT_PARAMS_OUT, help=f"default {DEFAULT_PARAMS_OUT}")
    fit.add_argument(
        "--sim-scenarios", type=_list_of(str), metavar="A,B", help="simulated scenarios (default: the training set)"
    )
    fit.add_argument(
        "--sim-seeds",
        type=_list_of(int),
        metavar="N,N",
        help="the seeds their plan draws from (default: the training seeds; '' for none: labels alone)",
    )


def _serve_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("serve", help="run the OTLP receivers and the HTTP API")
    for key in FLAG_NAMES:
        parser.add_argument(
            f"--{key.replace('_', '-')}", dest=key, metavar=FLAG_METAVARS.get(key), help=flag_help[key], default=None
        )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rca", description="Causal root-cause inference over OpenTelemetry traces")
    sub = parser.add_subparsers(dest="command", required=True)
    _serve_parser(sub)
    _fit_parser(sub)
    analyze = sub.add_parser("analyze", help="offline: rank the root causes in trace (and log) files")
    analyze.add_argument(
        "--traces",
        nargs="+",
        required=True,
        metavar="FILE",
        help="OTLP protobuf (.pb), OTLP/JSON or Jaeger JSON, gzipped or not",
    )
    analyze.add_argument(
        "--logs", nargs="+", default=[], metavar="FILE", help="OTLP protobuf or OTLP/JSON log export requests"
    )
    analyze.add_argument(
        "--metrics", nargs="+", default=[], metavar="FILE", help="OTLP protobuf or OTLP/JSON metric export requests"
    )
    analyze.add_argument("--alerts", metavar="FILE", help="Alertmanager webhook body: alerting services and window")
    analyze.add_argument(
        "--several", action="store_true", help="no effect, kept for old scripts: 'simultaneous' is always weighed"
    )
    demo = sub.add_parser("demo", help="the whole story in a minute: serve, simulated traffic, a fault, the causes")
    demo.add_argument("--scenario", default="llm-gpu_memory_bandwidth", help="see simulate --list")
    demo.add_argument("--seed", type=int, default=7, help="random seed (default 7)")
    demo.add_argument("--rate", type=float, default=0.5, help="mean requests per second (default 0.5)")
    demo.add_argument("--http", default="127.0.0.1:0", metavar="HOST:PORT", help="the API's address (default: any)")
    demo.add_argument("--keep-running", action="store_true", help="leave rca serve up until Ctrl-C")
    simulate = sub.add_parser("simulate", help="write a fault-injection case: traces, webhooks, truth.json")
    simulate.add_argument("scenario", nargs="?", metavar="SCENARIO", help="e.g. llm-gpu_memory_bandwidth (see --list)")
    simulate.add_argument("--out", metavar="DIR", help="directory to write the case into")
    simulate.add_argument("--seed", type=int, default=0, help="random seed, >= 0 (default 0)")
    simulate.add_argument("--rate", type=float, default=None, help="mean requests per second (default: per topology)")
    simulate.add_argument(
        "--profile", default="default", help="generator profile: default, or shifted (differently configured)"
    )
    simulate.add_argument(
        "--style",
        choices=("conventions", "real"),
        default="conventions",
        help="conventions: rca's own LLM span conventions (default); real: what vLLM, DCGM, kubelet and "
        "node_exporter emit (vLLM's spans and scraped metrics)",
    )
    simulate.add_argument("--list", action="store_true", help="print the scenario names and exit")
    bench = sub.add_parser("bench", help="methods side by side on the same cases (or: bench ingest, bench scale)")
    bench.add_argument(
        "--suite",
        default="smoke",
        help="smoke (CI, < 2 min), sim, shifted, real (the LLM scenarios as a real deployment emits them), "
        "nezha or full (default smoke)",
    )
    bench.add_argument(
        "--methods",
        default="rca,threshold,pagerank",
        help="comma-separated (default rca,threshold,pagerank); the bench extra adds baro,nsigma,microrank,tracerca",
    )
    bench.add_argument(
        "--signals",
        default="traces+logs+metrics",
        help="what rca is sent: traces+logs+metrics (default: what a case has), traces+logs, traces+metrics, traces",
    )
    bench.add_argument("--report", metavar="FILE", help="write the JSON report here")
    bench.add_argument("--plot", metavar="FILE", help="draw AC@k per method and fault type (.png or .svg)")
    bench_sub = bench.add_subparsers(dest="bench_command")
    ingest = bench_sub.add_parser("ingest", help="end-to-end OTLP/gRPC ingest rate beside bare parse and receiver")
    ingest.add_argument("--seconds", type=float, default=10.0, help="seconds per measurement (default 10)")
    ingest.add_argument("--rounds", type=_at_least_one, default=3, help="alternating bare and rca rounds (default 3)")
    ingest.add_argument("--rate", type=float, help="instead: a steady RATE spans/s for --seconds, RSS over time")
    scale = bench_sub.add_parser("scale", help="ranking and webhook time against graph size (generated meshes)")
    scale.add_argument("--sizes", default="50,200,1000", help="services per graph (default 50,200,1000)")
    scale.add_argument("--rate", type=float, default=30.0, help="simulated requests/s (default 30: ~270k spans a size)")
    scale.add_argument("--spans-per-second", type=float, default=10_000.0, help="replay pace (default 10k, 0 unpaced)")
    scale.add_argument("--webhooks", type=int, default=20, help="webhooks per size, each a new alert (default 20)")
    scale.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    scale.add_argument("--report", dest="scale_report", metavar="FILE", help="write the JSON report here")
    return parser


def _simulate(args: argparse.Namespace) -> int:
    from simulation import SCENARIOS

    if args.list:
        print("\n".join(SCENARIOS))
        return 0
    if not args.scenario or not args.out or args.seed < 0:
        print("rca simulate: give SCENARIO and --out DIR (and --seed >= 0), or --list", file=sys.stderr)
        return 2
    from rca.app.compose import simulate_case

    return simulate_case(args.scenario, Path(args.out), args.seed, args.rate, profile=args.profile, style=args.style)


def _exit_now(code: int) -> NoReturn:
    """Ends the process once `rca serve` or `rca demo` is done: everything is closed by then, and
    finalising the torch, Pyro and numba modules would add seconds to every stop."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "serve":
        try:
            settings = load_settings({k: getattr(args, k) for k in FLAG_NAMES}, os.environ)
        except ConfigError as exc:
            print(f"rca serve: {exc}", file=sys.stderr)
            return 2
        # The server never uses pandas, but scikit-learn imports it wherever it is installed (the
        # bench extra installs it): ~30 MB of RSS held for the server's life. None in sys.modules
        # makes that import fail, which scikit-learn expects.
        sys.modules.setdefault("pandas", None)  # type: ignore[arg-type]
        from rca.app.compose import serve

        _exit_now(serve(settings))
    if args.command == "analyze":
        from rca.app.compose import analyze

        return analyze(args.traces, args.alerts, log_paths=args.logs, metric_paths=args.metrics)
    if args.command == "simulate":
        return _simulate(args)
    if args.command == "fit":
        from rca.app.fit import run_fit

        db = args.db or os.environ.get("RCA_DB") or Settings().db
        return run_fit(db, Path(args.out), scenarios=args.sim_scenarios, seeds=args.sim_seeds)
    if args.command == "demo":
        from benchmarks.demo import run_demo

        try:
            code = run_demo(args.scenario, args.seed, args.rate, http=args.http, keep_running=args.keep_running)
        except (ValueError, RuntimeError) as exc:  # a bad scenario or rate; rca serve did not start
            print(f"rca demo: {exc}", file=sys.stderr)
            return 2
        _exit_now(code)
    if args.command == "bench" and args.bench_command == "ingest":
        from benchmarks.ingest import run_ingest_benchmark, run_steady_benchmark

        if args.rate:
            return run_steady_benchmark(args.rate, args.seconds)
        return run_ingest_benchmark(args.seconds, args.rounds)
    if args.command == "bench" and args.bench_command == "scale":
        from benchmarks.scale import run_scale_benchmark

        sizes = [int(n) for n in args.sizes.split(",") if n.strip()]
        report = args.scale_report or args.report
        return run_scale_benchmark(sizes, args.seed, args.rate, args.spans_per_second, args.webhooks, report)
    if args.command == "bench":
        from benchmarks.accuracy import run_accuracy_benchmark

        methods = [m.strip() for m in args.methods.split(",") if m.strip()]
        return run_accuracy_benchmark(args.suite, methods, args.report, args.plot, args.signals)
    return 2


if __name__ == "__main__":
    sys.exit(main())
