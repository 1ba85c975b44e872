"""Tests for rca.app.config: defaults, precedence, parsing and error messages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rca.app.config import (
    FLAG_NAMES,
    ConfigError,
    HostPort,
    Settings,
    flag_help,
    load_settings,
)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rca.toml"
    path.write_text(text)
    return path


def test_defaults_match_contract() -> None:
    s = load_settings({}, {})
    assert str(s.otlp_grpc) == "127.0.0.1:4317"
    assert str(s.otlp_http) == "127.0.0.1:4318"
    assert str(s.http) == "127.0.0.1:8080"
    assert s.db == "sqlite:///./rca-data/rca.db"
    assert s.api_token is None
    assert (s.window_seconds, s.retention_seconds, s.lookback_seconds) == (10.0, 900.0, 300.0)
    assert (s.ingest_queue, s.max_message_bytes) == (64, 67108864)
    assert s == Settings()
    assert not s.listens_beyond_loopback()


def test_none_flags_count_as_not_given() -> None:
    s = load_settings({"otlp_grpc": None, "config": None}, {"RCA_OTLP_GRPC": "127.0.0.1:1"})
    assert s.otlp_grpc == HostPort("127.0.0.1", 1)


@pytest.mark.parametrize(
    ("key", "env", "values", "expected"),
    [
        ("otlp_grpc", "RCA_OTLP_GRPC", ["h1:1", "h2:2", "h3:3"], ["h1:1", "h2:2", "h3:3"]),
        ("db", "RCA_DB", ["sqlite:///a", "sqlite:///b", "sqlite:///c"], None),
        ("window_seconds", "RCA_WINDOW_SECONDS", ["5", "6", "7"], [5.0, 6.0, 7.0]),
    ],
)
def test_precedence_flag_env_file_default(
    tmp_path: Path, key: str, env: str, values: list[str], expected: list[object] | None
) -> None:
    flag_v, env_v, file_v = values
    want = expected or values
    file_literal = file_v if key == "window_seconds" else f'"{file_v}"'
    cfg = str(write(tmp_path, f"{key} = {file_literal}\n"))

    def get(s: Settings) -> object:
        value = getattr(s, key)
        return str(value) if key == "otlp_grpc" else value

    assert get(load_settings({key: flag_v, "config": cfg}, {env: env_v})) == want[0]
    assert get(load_settings({"config": cfg}, {env: env_v})) == want[1]
    assert get(load_settings({"config": cfg}, {})) == want[2]
    default = getattr(Settings(), key)
    assert get(load_settings({}, {})) == (str(default) if key == "otlp_grpc" else default)


def test_config_path_from_env_and_flag_beats_env(tmp_path: Path) -> None:
    a = tmp_path / "a.toml"
    a.write_text('http = "0.0.0.0:1"\n')
    b = tmp_path / "b.toml"
    b.write_text('http = "0.0.0.0:2"\n')
    assert load_settings({}, {"RCA_CONFIG": str(a)}).http.port == 1
    assert load_settings({"config": str(b)}, {"RCA_CONFIG": str(a)}).http.port == 2


def test_port_zero_and_ipv6() -> None:
    s = load_settings({"http": "[::1]:0", "otlp_http": "localhost:0"}, {})
    assert s.http == HostPort("::1", 0)
    assert str(s.http) == "[::1]:0"
    assert s.otlp_http.port == 0
    assert not s.listens_beyond_loopback()
    assert HostPort.parse("[::]:4317") == HostPort("::", 4317)


@pytest.mark.parametrize("text", ["abc", "host:", ":80", "h:70000", "::1:80", "h:8x", "[zz]:1"])
def test_hostport_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        HostPort.parse(text)


@pytest.mark.parametrize(
    "body",
    [
        '[serve]\notlp-grpc = "0.0.0.0:9"\ningest_queue = 3\n',
        'otlp_grpc = "0.0.0.0:9"\n[serve]\ningest-queue = 3\n',
        'otlp_grpc = "0.0.0.0:9"\ningest_queue = 3\n',
    ],
)
def test_toml_serve_table_and_top_level(tmp_path: Path, body: str) -> None:
    s = load_settings({"config": str(write(tmp_path, body))}, {})
    assert s.otlp_grpc == HostPort("0.0.0.0", 9)
    assert s.ingest_queue == 3
    assert s.listens_beyond_loopback()


def test_duplicate_key_across_tables(tmp_path: Path) -> None:
    path = write(tmp_path, 'db = "sqlite:///x"\n[serve]\ndb = "sqlite:///y"\n')
    with pytest.raises(ConfigError, match="'db' given twice"):
        load_settings({"config": str(path)}, {})


@pytest.mark.parametrize("body", ['otlp_grcp = "a:1"\n', '[serve]\notlp_grcp = "a:1"\n'])
def test_unknown_toml_key_names_key_and_file(tmp_path: Path, body: str) -> None:
    path = write(tmp_path, body)
    with pytest.raises(ConfigError) as err:
        load_settings({"config": str(path)}, {})
    assert "unknown key 'otlp_grcp'" in str(err.value)
    assert str(path) in str(err.value)
    assert "did you mean 'otlp_grpc'" in str(err.value)


def test_unknown_flag_is_error_unknown_env_is_not() -> None:
    with pytest.raises(ConfigError, match="unknown flag key 'otlp_grcp'"):
        load_settings({"otlp_grcp": "a:1"}, {})
    s = load_settings({}, {"RCA_SOMETHING_ELSE": "x", "HTTP": "nonsense", "RCA_HTTP": ""})
    assert s == Settings()


def test_bad_value_names_key_and_source(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings({}, {"RCA_OTLP_GRPC": "abc"})
    assert str(err.value) == ("invalid value for otlp_grpc (from RCA_OTLP_GRPC): 'abc' is not HOST:PORT")
    with pytest.raises(ConfigError, match=r"invalid value for http \(from --http\)"):
        load_settings({"http": "nope"}, {})
    path = write(tmp_path, "otlp_grpc = 4317\n")
    with pytest.raises(ConfigError) as err:
        load_settings({"config": str(path)}, {})
    assert f"invalid value for otlp_grpc (from {path}): expected a string" in str(err.value)


def test_bad_token_does_not_echo_secret() -> None:
    with pytest.raises(ConfigError, match="api_token") as err:
        load_settings({"api_token": "sec ret"}, {})
    assert "sec ret" not in str(err.value)
    assert load_settings({}, {"RCA_API_TOKEN": "t0k"}).api_token == "t0k"


def test_missing_config_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigError, match=re.escape(f"config file {missing} not found")):
        load_settings({}, {"RCA_CONFIG": str(missing)})
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_settings({"config": str(tmp_path)}, {})


def test_toml_syntax_error_names_file(tmp_path: Path) -> None:
    path = write(tmp_path, "otlp_grpc = \n")
    with pytest.raises(ConfigError) as err:
        load_settings({"config": str(path)}, {})
    assert f"invalid TOML in {path}" in str(err.value)


@pytest.mark.parametrize(
    ("env", "value", "needle"),
    [
        ("RCA_WINDOW_SECONDS", "-1", "must be > 0"),
        ("RCA_WINDOW_SECONDS", "0", "must be > 0"),
        ("RCA_WINDOW_SECONDS", "nan", "not finite"),
        ("RCA_LOOKBACK_SECONDS", "-5", "must be >= 0"),
        ("RCA_INGEST_QUEUE", "0", "must be >= 1"),
        ("RCA_INGEST_QUEUE", "2.5", "not an integer"),
        ("RCA_MAX_MESSAGE_BYTES", "100", "must be >= 1024"),
    ],
)
def test_numeric_extras_validation(env: str, value: str, needle: str) -> None:
    key = env.removeprefix("RCA_").lower()
    with pytest.raises(ConfigError, match=rf"invalid value for {key} \(from {env}\)") as err:
        load_settings({}, {env: value})
    assert needle in str(err.value)


def test_retention_must_cover_window(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings({"window_seconds": "1000"}, {})
    msg = str(err.value)
    assert "retention_seconds (900, from default)" in msg
    assert "window_seconds (1000, from --window-seconds)" in msg
    path = write(tmp_path, "window_seconds = 60\nretention_seconds = 60.0\n")
    s = load_settings({"config": str(path)}, {})
    assert (s.window_seconds, s.retention_seconds) == (60.0, 60.0)


def test_toml_type_errors(tmp_path: Path) -> None:
    path = write(tmp_path, "ingest_queue = true\n")
    with pytest.raises(ConfigError, match=r"invalid value for ingest_queue.*expected a number"):
        load_settings({"config": str(path)}, {})
    path = write(tmp_path, "[serve]\nmax_message_bytes = 2048.0\n")
    with pytest.raises(ConfigError, match=r"max_message_bytes.*not an integer"):
        load_settings({"config": str(path)}, {})
    path = write(tmp_path, "serve = 3\n")
    with pytest.raises(ConfigError, match=r"'serve'.*must be a table"):
        load_settings({"config": str(path)}, {})


@pytest.mark.parametrize(
    ("flags", "beyond"),
    [
        ({"http": "0.0.0.0:8080"}, True),
        ({"otlp_grpc": "[::]:4317"}, True),
        ({"otlp_http": "my-host:4318"}, True),
        ({"http": "127.1.2.3:1", "otlp_grpc": "[::1]:2", "otlp_http": "LOCALHOST:3"}, False),
    ],
)
def test_listens_beyond_loopback(flags: dict[str, str | None], beyond: bool) -> None:
    assert load_settings(flags, {}).listens_beyond_loopback() is beyond


def test_flag_names_and_help() -> None:
    assert {"otlp_grpc", "otlp_http", "http", "db", "api_token", "config"} <= set(FLAG_NAMES)
    assert set(flag_help) == set(FLAG_NAMES)
    assert "RCA_OTLP_GRPC" in flag_help["otlp_grpc"]
    assert "127.0.0.1:4317" in flag_help["otlp_grpc"]
    assert "RCA_MAX_MESSAGE_BYTES" in flag_help["max_message_bytes"]
    assert "67108864" in flag_help["max_message_bytes"]
