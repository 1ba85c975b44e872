"""`rca serve` as a child process on free loopback ports, for the demo, benchmarks and tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def launch(*extra: str) -> tuple[subprocess.Popen[str], dict[str, str]]:
    """Starts `rca serve` on port 0 everywhere; returns it and its `listening` line.
    `RCA_*` variables of the caller's environment are not passed on."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RCA_")}
    loopback = ("--otlp-grpc", "127.0.0.1:0", "--otlp-http", "127.0.0.1:0", "--http", "127.0.0.1:0")
    process = subprocess.Popen(
        [sys.executable, "-m", "rca.app.cli", "serve", *loopback, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line:
        raise RuntimeError(f"rca serve did not start: {process.communicate(timeout=10)[1]}")
    announced: dict[str, str] = json.loads(line)
    if announced.get("event") != "listening":
        raise RuntimeError(f"unexpected first line from rca serve: {line!r}")
    return process, announced
