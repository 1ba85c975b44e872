"""Shared fixtures: a real `rca serve` subprocess on loopback, port 0."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

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
    env = {k: v for k, v in os.environ.items() if not k.startswith("RCA_")}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rca.cli",
            "serve",
            "--otlp-grpc",
            "127.0.0.1:0",
            "--otlp-http",
            "127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
            "--db",
            f"sqlite:///{tmp_path}/rca.db",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        raise RuntimeError(f"rca serve did not start: {process.communicate(timeout=10)[1]}")
    announced = json.loads(line)
    assert announced["event"] == "listening"
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
