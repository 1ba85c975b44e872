"""Shared fixtures: a real `rca serve` subprocess on loopback, port 0."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from benchmarks.serve_process import launch

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"


@dataclass(frozen=True)
class Server:
    process: subprocess.Popen[str]
    otlp_grpc: str
    otlp_http: str
    http: str

    @property
    def api(self) -> str:
        return f"http://{self.http}"


def start_server(tmp_path: Path, *extra: str) -> Server:
    process, announced = launch("--db", f"sqlite:///{tmp_path}/rca.db", *extra)
    return Server(process, announced["otlp_grpc"], announced["otlp_http"], announced["http"])


def stop_server(server: Server) -> int:
    server.process.send_signal(signal.SIGTERM)
    try:
        return server.process.wait(timeout=20)
    finally:
        if server.process.poll() is None:
            server.process.kill()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    running = start_server(tmp_path)
    yield running
    assert stop_server(running) == 0


@pytest.fixture
def datasets() -> Path:
    if not DATASETS.is_dir():
        pytest.skip(f"shared datasets not found at {DATASETS} (they sit beside the checkout in CI)")
    return DATASETS
