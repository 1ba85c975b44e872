"""A real Prometheus holding made-up history: series written as OpenMetrics text, turned into TSDB
blocks by `promtool tsdb create-blocks-from openmetrics`, served by `prometheus` (no scrape
targets) on a free loopback port. Used by the `--prometheus-url` tests and benchmark; backfilled
history lies hours in the past, where blocks never meet the head, and rca works in event time."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx
import numpy as np
import numpy.typing as npt

PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"
READY_TIMEOUT_S = 120.0
START_ATTEMPTS = 5


@dataclass(frozen=True)
class Sample:
    """One series: its sample name (a counter's with `_total`), labels, times (s) and values."""

    name: str
    labels: Mapping[str, str]
    times_s: npt.NDArray[np.float64]
    values: npt.NDArray[np.float64]


@dataclass(frozen=True)
class Family:
    """A metric family (`# TYPE name kind`) and its series."""

    name: str
    kind: str  # counter, gauge, histogram
    series: list[Sample] = field(default_factory=list)


def _labels(labels: Mapping[str, str]) -> str:
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return "{" + inner + "}" if inner else ""


def write_openmetrics(out: IO[str], families: Iterable[Family]) -> None:
    """The families as OpenMetrics text with timestamps, `# EOF` last."""
    for family in families:
        out.write(f"# TYPE {family.name} {family.kind}\n")
        for s in family.series:
            head = s.name + _labels(s.labels)
            out.writelines(
                f"{head} {v:.10g} {t:.3f}\n" for t, v in zip(s.times_s.tolist(), s.values.tolist(), strict=True)
            )
    out.write("# EOF\n")


def create_blocks(text: Path, data_dir: Path, promtool: str = PROMTOOL) -> None:
    data_dir.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", "-q", str(text), str(data_dir)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"promtool failed: {done.stderr.strip()[-2000:]}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class RunningPrometheus:
    process: subprocess.Popen[bytes]
    url: str

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)


def _ready(running: RunningPrometheus, deadline: float) -> bool:
    """Waits for `/-/ready`; False when the process ended first (a port taken meanwhile)."""
    while time.monotonic() < deadline:
        if running.process.poll() is not None:
            return False
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(f"{running.url}/-/ready", timeout=2).status_code == 200:
                return True
        time.sleep(0.1)
    running.stop()
    raise RuntimeError(f"prometheus at {running.url} not ready within {READY_TIMEOUT_S:g}s")


def start_prometheus(data_dir: Path, workdir: Path, binary: str = PROMETHEUS) -> RunningPrometheus:
    """`prometheus` over `data_dir` on a free loopback port, ready; retried on a port collision."""
    config = workdir / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1h\nscrape_configs: []\n")
    for attempt in range(START_ATTEMPTS):
        port = _free_port()
        log = (workdir / f"prometheus-{attempt}.log").open("wb")
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={data_dir}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--storage.tsdb.retention.time=3650d",
            ],
            stdout=log,
            stderr=log,
        )
        log.close()
        running = RunningPrometheus(process, f"http://127.0.0.1:{port}")
        if _ready(running, time.monotonic() + READY_TIMEOUT_S):
            return running
    raise RuntimeError(f"prometheus would not start; see {workdir}/prometheus-*.log")


@contextlib.contextmanager
def backfilled(families: Iterable[Family], workdir: Path) -> Iterator[RunningPrometheus]:
    """A ready Prometheus holding `families`, stopped afterwards."""
    text = workdir / "backfill.om.txt"
    with text.open("w") as out:
        write_openmetrics(out, families)
    create_blocks(text, workdir / "data")
    text.unlink()
    running = start_prometheus(workdir / "data", workdir)
    try:
        yield running
    finally:
        running.stop()
