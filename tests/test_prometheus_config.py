"""`--prometheus-url` and `--prometheus-timeout-seconds` as settings: flag, environment, file,
default, validation that names the key, and the serve flags built from them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rca.app.cli import build_parser
from rca.app.config import FLAG_NAMES, ConfigError, Settings, flag_help, load_settings


def test_defaults_are_none_and_two_seconds() -> None:
    settings = load_settings({}, {})
    assert (settings.prometheus_url, settings.prometheus_timeout_seconds) == (None, 2.0)
    assert settings == Settings()


def test_flag_beats_environment_beats_file(tmp_path: Path) -> None:
    config = tmp_path / "rca.toml"
    config.write_text('[serve]\nprometheus-url = "http://file:9090"\nprometheus_timeout_seconds = 5\n')
    env = {"RCA_PROMETHEUS_URL": "https://env.example/prometheus/", "RCA_PROMETHEUS_TIMEOUT_SECONDS": "3.5"}
    flags = {"prometheus_url": "http://flag:9090", "config": str(config)}
    assert load_settings(flags, env).prometheus_url == "http://flag:9090"
    from_env = load_settings({"config": str(config)}, env)
    assert (from_env.prometheus_url, from_env.prometheus_timeout_seconds) == ("https://env.example/prometheus", 3.5)
    from_file = load_settings({"config": str(config)}, {})
    assert (from_file.prometheus_url, from_file.prometheus_timeout_seconds) == ("http://file:9090", 5.0)


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("prometheus_url", "prometheus:9090", "not an http(s) URL"),
        ("prometheus_url", "ftp://prometheus:9090", "not an http(s) URL"),
        ("prometheus_url", "http://", "not an http(s) URL"),
        ("prometheus_url", "http://prometheus:99999", "Port out of range"),
        ("prometheus_url", "http://prometheus:9090/api/v1/query?query=up", "without query"),
        ("prometheus_timeout_seconds", "0", "must be > 0"),
        ("prometheus_timeout_seconds", "soon", "is not a number"),
    ],
)
def test_bad_values_are_startup_errors_naming_the_key(key: str, value: str, says: str) -> None:
    with pytest.raises(
        ConfigError, match=rf"invalid value for {key} \(from --{key.replace('_', '-')}\).*{re.escape(says)}"
    ):
        load_settings({key: value}, {})


def test_serve_has_the_flags_with_their_environment_variables() -> None:
    assert {"prometheus_url", "prometheus_timeout_seconds"} <= set(FLAG_NAMES)
    assert "env RCA_PROMETHEUS_URL, default none" in flag_help["prometheus_url"]
    args = build_parser().parse_args(
        ["serve", "--prometheus-url", "http://p:9090", "--prometheus-timeout-seconds", "1"]
    )
    assert (args.prometheus_url, args.prometheus_timeout_seconds) == ("http://p:9090", "1")


def test_serve_wires_a_prometheus_pull_only_when_the_url_is_set(tmp_path: Path) -> None:
    from ingest.prometheus import PrometheusPull
    from rca.app.compose import Service

    for url in (None, "http://127.0.0.1:9/prometheus"):
        settings = Settings(db=f"sqlite:///{tmp_path}/rca.db", prometheus_url=url, prometheus_timeout_seconds=0.5)
        service = Service(settings)
        try:
            pulls = service.incidents.pulls
            if url is None:
                assert pulls == ()
                continue
            (pull,) = pulls
            assert isinstance(pull, PrometheusPull)
            assert (pull.url, pull.timeout_s, pull.window_ns) == (url, 0.5, service.graph.window_ns)
            assert service.incidents.history_ns == 600 * 1_000_000_000  # what the ranker reads before a window
        finally:
            service.writer.close()
            service.store.close()
