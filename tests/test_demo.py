"""`rca demo` end to end, as a user runs it: the story names the injected node and a ranked cause,
the printed URLs answer while `--keep-running` holds the service up, and Ctrl-C exits 0."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import httpx
import pytest

from simulation import simulate

SCENARIO, SEED = "llm-kv_cache_fragmentation", 5


@pytest.mark.timeout(120)
def test_demo_tells_the_story_and_keeps_running_until_interrupted() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RCA_")}
    demo = subprocess.Popen(
        [sys.executable, "-m", "rca.app.cli", "demo", "--scenario", SCENARIO, "--seed", str(SEED), "--keep-running"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert demo.stdout is not None
    lines = []
    try:
        for line in demo.stdout:
            lines.append(line)
            if "Ctrl-C" in line:
                break
        story = "".join(lines)
        truth = simulate(SCENARIO, seed=SEED, rate=0.5).truth
        assert f"injected: {truth.fault} on {truth.node}" in story, story
        top = re.search(r"^  1\. (\S+).*: (\w+), p = (0\.\d\d|1\.00)", story, re.MULTILINE)
        assert top is not None, story
        causes_url = re.search(r"^causes as JSON: +(\S+)$", story, re.MULTILINE)
        page = r"^the causal graph: +(http://127\.0\.0\.1:\d+/ui/incidents/inc-\w+)$"
        graph_url = re.search(page, story, re.MULTILINE)
        assert causes_url is not None and graph_url is not None, story
        causes = httpx.get(causes_url.group(1), timeout=30).json()
        assert causes["causes"][0]["node"] == top.group(1)
        assert causes["causes"][0]["fault"] == top.group(2)
        assert truth.node in {c["node"] for c in causes["causes"]}
    finally:
        demo.send_signal(signal.SIGINT)
        code = demo.wait(timeout=60)
    assert code == 0, demo.stderr.read() if demo.stderr else ""
