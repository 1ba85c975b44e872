"""The incident pages in a real headless Chromium (Debian's `chromium`): a live `rca serve` with a
simulated incident, the page's DOM and a screenshot checked."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from PIL import Image

from tests.debian import ensure_binary
from tests.incidentcase import LiveIncident, live_incident

WINDOW = (1400, 2000)
CAUSE_RED = (0xF2, 0x49, 0x5C)


def _headless(binary: str, profile: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--user-data-dir={profile}"]
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveIncident]:
    with live_incident(tmp_path_factory.mktemp("ui")) as running:
        yield running


def test_incident_page_renders_in_chromium(live: LiveIncident, tmp_path: Path) -> None:
    chromium = ensure_binary("/usr/bin/chromium", "chromium")
    url = f"{live.server.api}/ui/incidents/{live.incident_id}"
    dom = _headless(chromium, tmp_path / "profile", "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    truth = live.case.truth
    top_row = re.search(r'<tr id="cause-1" data-node="([^"]+)"', dom.stdout)
    assert top_row is not None and top_row.group(1) == truth.node  # the injected fault is the top cause
    assert f'data-node="{truth.node}"' in dom.stdout and 'class="node top"' in dom.stdout
    assert dom.stdout.count('class="edge on-path"') == len(_top_path(live)) - 1
    assert re.search(r"gpu_dram_utilization|dram_bytes_per_output_token", dom.stdout)  # its class's evidence

    shot = Path(os.environ.get("RCA_UI_SCREENSHOT", tmp_path / "incident.png"))
    size = f"--window-size={WINDOW[0]},{WINDOW[1]}"
    taken = _headless(chromium, tmp_path / "profile", f"--screenshot={shot}", size, url)
    assert taken.returncode == 0 and shot.exists(), taken.stderr[-2000:]
    with Image.open(shot) as image:
        assert image.size == WINDOW
        pixels = image.convert("RGB")
        colours = pixels.getcolors(maxcolors=1 << 20) or []
        assert len(colours) > 50  # not blank
        red = sum(n for n, rgb in colours if all(abs(a - b) < 12 for a, b in zip(rgb, CAUSE_RED, strict=True)))
        assert red > 2000  # the verdict, the top cause and its path are drawn in the cause colour


def _top_path(live: LiveIncident) -> list[str]:
    causes = httpx.get(f"{live.server.api}/incidents/{live.incident_id}/causes", timeout=60).json()["causes"]
    path: list[str] = causes[0]["path"]
    return path


def test_incident_list_links_to_the_page(live: LiveIncident) -> None:
    page = httpx.get(f"{live.server.api}/ui/incidents", params={"status": "open"}, timeout=60)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert f'href="/ui/incidents/{live.incident_id}"' in page.text
    assert live.case.truth.node in page.text
    filtered = httpx.get(f"{live.server.api}/ui/incidents", params={"service": "no-such-service"}, timeout=60)
    assert live.incident_id not in filtered.text


def test_assets_ship_with_the_package_and_nothing_is_fetched_elsewhere(live: LiveIncident) -> None:
    page = httpx.get(f"{live.server.api}/ui/incidents/{live.incident_id}", timeout=60).text
    assets = re.findall(r'(?:src|href)="([^"#]+)"', page)
    assert assets and all(a.startswith("/") for a in assets), assets
    for asset in (a for a in assets if a.startswith("/ui/static/")):
        assert httpx.get(f"{live.server.api}{asset}", timeout=30).status_code == 200


def test_unknown_incident_page_is_404(live: LiveIncident) -> None:
    response = httpx.get(f"{live.server.api}/ui/incidents/inc-nope", timeout=30)
    assert response.status_code == 404
    assert "inc-nope" in response.json()["detail"]
