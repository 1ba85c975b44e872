"""The deployment examples (docs/deploy.md): the small Collector and the fleet's agent and gateway
Collectors are wired (every component a pipeline names is configured, connectors included), the
gateway turns traces into the service-graph and span metrics rca reads from Prometheus, the agent
routes traces by trace id and everything else to rca's gRPC port, their scrape configs pass
`promtool check config`, and the guide names every service-graph family the contract names."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.debian import ensure_binary
from tests.test_grafana_dashboard import GRAFANA

DEPLOY = GRAFANA.parent / "docs" / "deploy.md"
CONTRACT = GRAFANA.parents[1] / "shared" / "CONTRACT.md"
COLLECTORS = ["otel-collector.yaml", "otel-collector-agent.yaml", "otel-collector-gateway.yaml"]
PORT_LABEL = "__meta_kubernetes_pod_container_port_number"
ENV = {"K8S_NODE_NAME": "node-1", "K8S_NODE_IP": "10.0.0.1"}  # downward-API values for promtool


def _load(name: str) -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load((GRAFANA / name).read_text())
    return config


def _pipelines(config: dict[str, Any], kind: str) -> dict[str, dict[str, list[str]]]:
    """The pipelines of one signal: `metrics` and `metrics/...`."""
    pipelines: dict[str, dict[str, list[str]]] = config["service"]["pipelines"]
    return {name: p for name, p in pipelines.items() if name.split("/")[0] == kind}


def _scraped_ports(scrape_configs: list[dict[str, Any]]) -> set[str]:
    """The ports each job scrapes: its static targets' and those its relabelling keeps."""
    ports = {t.rsplit(":", 1)[1] for job in scrape_configs for s in job.get("static_configs", []) for t in s["targets"]}
    for job in scrape_configs:
        for rule in job.get("relabel_configs", []):
            if rule.get("action") == "keep" and rule["source_labels"] == [PORT_LABEL]:
                ports.add(rule["regex"])
    return ports


@pytest.mark.parametrize("name", COLLECTORS)
def test_every_component_a_pipeline_names_is_configured(name: str) -> None:
    config = _load(name)
    connectors = set(config.get("connectors", {}))
    for pipeline, wired in config["service"]["pipelines"].items():
        for kind in ("receivers", "processors", "exporters"):
            known = set(config.get(kind, {})) | (connectors if kind != "processors" else set())
            assert set(wired.get(kind, [])) <= known, (name, pipeline, kind)
    used = {c for wired in config["service"]["pipelines"].values() for kind in wired.values() for c in kind}
    assert connectors <= used, f"{name}: connectors in no pipeline: {connectors - used}"


def test_gateway_turns_traces_into_service_graph_and_span_metrics_for_prometheus() -> None:
    config = _load("otel-collector-gateway.yaml")
    (traces,) = _pipelines(config, "traces").values()
    assert set(traces["exporters"]) == {"servicegraph", "spanmetrics"} and traces["receivers"] == ["otlp"]
    (metrics,) = [p for p in _pipelines(config, "metrics").values() if "prometheusremotewrite" in p["exporters"]]
    assert set(metrics["receivers"]) == {"servicegraph", "spanmetrics"}
    assert config["exporters"]["prometheusremotewrite"]["endpoint"] == "http://prometheus:9090/api/v1/write"
    graph, spans = config["connectors"]["servicegraph"], config["connectors"]["spanmetrics"]
    assert graph["store"]["ttl"] and graph["store"]["max_items"] > 1000 and graph["dimensions"]
    assert len(graph["latency_histogram_buckets"]) == 16  # the default bounds the guide's arithmetic counts
    assert spans["histogram"]["explicit"]["buckets"] == graph["latency_histogram_buckets"]
    # traces_span_metrics_calls_total and traces_span_metrics_duration_seconds_*, as the contract names them
    assert spans["namespace"] == "traces.span.metrics" and spans["histogram"]["unit"] == "s"
    # each gateway writes every service pair: its own `instance` keeps the series apart
    stamps = [config["processors"][p] for p in metrics["processors"] if p.split("/")[0] == "resource"]
    assert any(a["key"] == "service.instance.id" for stamp in stamps for a in stamp["attributes"])


def test_agent_routes_traces_by_trace_id_and_the_rest_to_rca() -> None:
    config = _load("otel-collector-agent.yaml")
    (traces,) = _pipelines(config, "traces").values()
    assert traces["exporters"] == ["loadbalancing"]
    balancer = config["exporters"]["loadbalancing"]
    assert balancer["routing_key"] == "traceID" and {"dns", "k8s", "static"} & set(balancer["resolver"])
    assert "endpoint" not in balancer["protocol"]["otlp"]  # the resolver supplies it
    rca = config["exporters"]["otlp/rca"]
    assert rca["endpoint"] == "rca:4317" and rca["headers"]["authorization"] == "Bearer ${env:RCA_API_TOKEN}"
    assert rca["compression"] == "gzip" and rca["retry_on_failure"]["enabled"] is True
    for kind in ("metrics", "logs"):
        (pipeline,) = _pipelines(config, kind).values()
        assert pipeline["exporters"] == ["otlp/rca"], kind
    (metrics,) = _pipelines(config, "metrics").values()
    assert {"otlp", "prometheus"} <= set(metrics["receivers"])


@pytest.mark.parametrize("name", ["otel-collector.yaml", "otel-collector-agent.yaml"])
def test_scrape_configs_reach_dcgm_vllm_and_node_exporter_and_pass_promtool(name: str, tmp_path: Path) -> None:
    scrape = _load(name)["receivers"]["prometheus"]["config"]
    assert _scraped_ports(scrape["scrape_configs"]) >= {"9400", "8000", "9100"}  # DCGM, vLLM, node_exporter

    def expand(match: re.Match[str]) -> str:
        assert match.group(1) in ENV, f"{name}: no example value for ${{env:{match.group(1)}}}"
        return ENV[match.group(1)]

    promtool = ensure_binary("/usr/bin/promtool", "prometheus")
    path = tmp_path / "prometheus.yml"

    def check() -> str:
        path.write_text(re.sub(r"\$\{env:(\w+)\}", expand, yaml.safe_dump(scrape)).replace("$$", "$"))
        checked = subprocess.run([promtool, "check", "config", str(path)], capture_output=True, text=True, timeout=60)
        return "" if checked.returncode == 0 else checked.stdout + checked.stderr

    failure = check()
    if "field kubernetes_sd_configs not found" in failure:  # Debian builds Prometheus without Kubernetes discovery
        for job in scrape["scrape_configs"]:
            if job.pop("kubernetes_sd_configs", None):
                job["static_configs"] = [{"targets": ["discovered:80"]}]
        failure = check()
    assert not failure, failure


def test_small_collector_sends_traces_logs_and_metrics_to_rca_grpc() -> None:
    config = _load("otel-collector.yaml")
    for kind in ("traces", "logs", "metrics"):
        (pipeline,) = _pipelines(config, kind).values()
        endpoints = [config["exporters"][e].get("endpoint", "") for e in pipeline["exporters"]]
        assert any(e.endswith(":4317") for e in endpoints), (kind, endpoints)
    (metrics,) = _pipelines(config, "metrics").values()
    assert {"otlp", "prometheus"} <= set(metrics["receivers"])


def _service_graph_families(contract: str) -> list[str]:
    """The `traces_*` names in the contract's section 8; `_client_seconds` after a name reads as its sibling."""
    section = contract.split("\n## 8.", 1)[1].split("\n## ", 1)[0]
    names: list[str] = []
    for name, sibling in re.findall(r"`(traces_\w+)`(?:\s+and\s+`(_\w+)`)?", section):
        names.append(name)
        if sibling:
            names.append(name.rsplit("_", sibling.count("_"))[0] + sibling)
    return names


def test_deploy_guide_links_the_fleet_collectors() -> None:
    guide = DEPLOY.read_text()
    linked = {(DEPLOY.parent / target).resolve() for target in re.findall(r"\]\(([^)#\s]+)\)", guide)}
    for name in ("otel-collector-gateway.yaml", "otel-collector-agent.yaml", "otel-collector.yaml"):
        assert (GRAFANA / name).resolve() in linked, f"docs/deploy.md does not link grafana/{name}"


def test_deploy_guide_names_every_service_graph_family_the_contract_names() -> None:
    guide = DEPLOY.read_text()
    if not CONTRACT.exists():
        pytest.skip(f"{CONTRACT} absent: the contract's metric names are read from it")
    families = _service_graph_families(CONTRACT.read_text())
    assert "traces_service_graph_request_client_seconds" in families and len(families) >= 6
    missing = [f for f in families if f not in guide]
    assert not missing, f"docs/deploy.md does not name {missing}"
