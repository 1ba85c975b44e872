"""grafana/: the dashboard's Infinity queries run against a live `rca serve` holding a simulated
incident and return the fields its panels use; data links land on rca's pages; the provisioning,
Alertmanager and collector examples parse (and Alertmanager's passes `amtool check-config`); the
collector's logs pipeline tails pod logs and its example parsers read a level and span ids."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.incidentcase import LiveIncident, live_incident

GRAFANA = Path(__file__).resolve().parents[1] / "grafana"
DASHBOARD = json.loads((GRAFANA / "dashboards" / "rca.json").read_text())
INFINITY = "yesoreyeram-infinity-datasource"
NODE_FIELDS = {"id", "title", "subtitle", "mainstat", "secondarystat", "color", "highlighted"}
EDGE_FIELDS = {"id", "source", "target", "mainstat", "secondarystat", "thickness", "color"}


def _targets() -> list[dict[str, Any]]:
    """Every Infinity query of the dashboard: panel targets and the variables' queries."""
    found = [t for p in DASHBOARD["panels"] for t in p["targets"]]
    found += [v["query"]["infinityQuery"] for v in DASHBOARD["templating"]["list"] if v["type"] == "query"]
    return found


def _links() -> list[str]:
    overrides = [o for p in DASHBOARD["panels"] for o in p["fieldConfig"]["overrides"]]
    return [
        link["url"] for o in overrides for prop in o["properties"] if prop["id"] == "links" for link in prop["value"]
    ]


def _substitute(text: str, values: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        assert match.group(1) in values, f"no value for ${{{match.group(1)}}} in {text}"
        return values[match.group(1)]

    return re.sub(r"\$\{([\w.]+)\}", value, text)


def _select(document: Any, selector: str) -> Any:
    """A gjson path as Infinity's backend parser reads it (dotted keys, numeric indices); KeyError if absent."""
    for part in selector.split(".") if selector else ():
        document = document[int(part)] if isinstance(document, list) else document[part]
    return document


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveIncident]:
    with live_incident(tmp_path_factory.mktemp("grafana")) as running:
        yield running


def _variables(live: LiveIncident) -> dict[str, str]:
    return {
        "__from": str(live.case.start_ns // 1_000_000),
        "__to": str(live.cut_ns // 1_000_000),
        "incident": live.incident_id,
        "rca_url": live.server.api,
    }


def test_every_query_uses_the_provisioned_infinity_datasource() -> None:
    provisioned = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "rca.yaml").read_text())
    (source,) = provisioned["datasources"]
    assert source["type"] == INFINITY and source["jsonData"]["auth_method"] == "bearerToken"
    targets = _targets()
    assert len(targets) >= 7
    for target in targets:
        assert target["datasource"] == {"type": INFINITY, "uid": source["uid"]}
        assert target["source"] == "url" and target["url"].startswith("/") and target["parser"] == "backend"
    kinds = {p["type"] for p in DASHBOARD["panels"]}
    assert {"nodeGraph", "table"} <= kinds
    assert any(v["name"] == "incident" for v in DASHBOARD["templating"]["list"])


def test_dashboard_queries_return_the_fields_the_panels_use(live: LiveIncident) -> None:
    values = _variables(live)
    seen: dict[str, list[dict[str, Any]]] = {}
    for target in _targets():
        url = _substitute(target["url"], values)
        response = httpx.get(f"{live.server.api}{url}", timeout=60)
        assert response.status_code == 200, (url, response.text)
        rows = _select(response.json(), target["root_selector"])
        assert isinstance(rows, list) and rows, f"{url} ({target['root_selector']!r}) returned no rows"
        for column in target["columns"]:
            for row in rows:
                _select(row, column["selector"])  # KeyError names the missing field
        names = {c["selector"] for c in target["columns"]}
        if target["format"] == "node-graph-nodes":
            assert names >= NODE_FIELDS and any(n.startswith("arc__") for n in names)
        if target["format"] == "node-graph-edges":
            assert names >= EDGE_FIELDS
        seen[f"{target['format']} {url}"] = rows
    truth = live.case.truth
    incident_nodes = seen[f"node-graph-nodes /incidents/{live.incident_id}/graph/nodes"]
    assert [n["id"] for n in incident_nodes if n["highlighted"]] == [truth.node]
    assert any(n["id"] == truth.node for n in seen[f"node-graph-nodes {_substitute(_live_url(), values)}"])
    (open_incident,) = seen["table /incidents?status=open&limit=100"]
    assert open_incident["id"] == live.incident_id and open_incident["causes"][0]["node"] == truth.node


def _live_url() -> str:
    (panel,) = [p for p in DASHBOARD["panels"] if p["title"] == "Live service graph"]
    url: str = panel["targets"][0]["url"]
    return url


def test_data_links_land_on_rca_pages(live: LiveIncident) -> None:
    values = {**_variables(live), "__data.fields.id": live.case.truth.service, "__value.raw": live.incident_id}
    landed = 0
    for link in _links():
        if not link.startswith("${rca_url}/ui/"):
            continue
        response = httpx.get(_substitute(link, values), timeout=60)
        assert response.status_code == 200 and live.incident_id in response.text, link
        landed += 1
    assert landed >= 3


def test_incident_graph_is_the_flat_arrays_together_and_unknown_is_404(live: LiveIncident) -> None:
    api, incident = live.server.api, live.incident_id
    graph = httpx.get(f"{api}/incidents/{incident}/graph", timeout=60).json()
    assert set(graph) == {"nodes", "edges"}
    assert graph["nodes"] == httpx.get(f"{api}/incidents/{incident}/graph/nodes", timeout=60).json()
    assert graph["edges"] == httpx.get(f"{api}/incidents/{incident}/graph/edges", timeout=60).json()
    for suffix in ("graph", "graph/nodes", "graph/edges"):
        missing = httpx.get(f"{api}/incidents/inc-unknown/{suffix}", timeout=30)
        assert missing.status_code == 404 and "inc-unknown" in missing.json()["detail"]


def test_alertmanager_example_routes_to_the_webhook_with_bearer_auth(tmp_path: Path) -> None:
    config = yaml.safe_load((GRAFANA / "alertmanager.yml").read_text())
    (receiver,) = [r for r in config["receivers"] if r["name"] == config["route"]["receiver"]]
    (webhook,) = receiver["webhook_configs"]
    assert webhook["url"].endswith("/webhooks/alertmanager")
    assert webhook["http_config"]["authorization"]["credentials"]
    amtool = shutil.which("amtool")
    if amtool is None:
        pytest.skip("amtool not installed (Debian prometheus-alertmanager; `make test-deps`)")
    checked = subprocess.run(
        [amtool, "check-config", str(GRAFANA / "alertmanager.yml")], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize("name", ["otel-collector.yaml", "jaeger-v2.yaml"])
def test_collector_pipelines_forward_traces_to_rca(name: str) -> None:
    config = yaml.safe_load((GRAFANA / name).read_text())
    pipelines = config["service"]["pipelines"]
    pipeline = pipelines["traces"]
    assert "otlp/rca" in pipeline["exporters"] and "otlp" in pipeline["receivers"]
    exporter = config["exporters"]["otlp/rca"]
    assert exporter["endpoint"].endswith(":4317") and exporter["headers"]["authorization"].startswith("Bearer ")
    for wired in pipelines.values():  # every component a pipeline names is configured
        for kind in ("receivers", "processors", "exporters"):
            assert set(wired.get(kind, [])) <= set(config[kind]), (kind, wired)


def test_collector_logs_pipeline_tails_pod_logs_and_forwards_them_to_rca() -> None:
    config = yaml.safe_load((GRAFANA / "otel-collector.yaml").read_text())
    logs = config["service"]["pipelines"]["logs"]
    assert set(logs["receivers"]) == {"otlp", "filelog"} and logs["processors"] == ["batch"]
    assert logs["exporters"] == ["otlp/rca"]  # the traces' exporter: rca's one gRPC port
    filelog = config["receivers"]["filelog"]
    assert filelog["include"] == ["/var/log/pods/*/*/*.log"]
    operators = filelog["operators"]
    assert operators[0]["type"] == "container"  # unwraps the runtime's line, sets k8s.pod.name
    parsers = {op["id"]: op for op in operators if op["type"] == "regex_parser"}
    assert all(op["on_error"] == "send_quiet" for op in parsers.values())  # unparsed lines are kept
    level = re.search(parsers["level"]["regex"], "12:00:01.5 ERROR payment failed: timeout")
    assert level is not None and level["level"] == "ERROR"
    assert parsers["level"]["severity"]["parse_from"] == "attributes.level"
    line = "GET /cart 200 trace_id=4bf92f3577b34da6a3ce929d0e0e4736 span_id=00f067aa0ba902b7 in 12ms"
    ids = re.search(parsers["trace_ids"]["regex"], line)
    assert ids is not None and ids.groupdict() == {
        "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
        "span_id": "00f067aa0ba902b7",
    }
    trace = parsers["trace_ids"]["trace"]
    assert {k: v["parse_from"] for k, v in trace.items()} == {
        "trace_id": "attributes.trace_id",
        "span_id": "attributes.span_id",
    }
