"""Settings of `rca serve` (docs/interface.md, Configuration): flag > environment > file > default.

Every setting has a flag key (the argparse dest, e.g. ``otlp_grpc``), an environment variable
(``RCA_`` + the key upper-cased) and a TOML key. The file (flag ``config`` or ``RCA_CONFIG``)
holds keys at top level, or under a ``[serve]`` table, or both (a key may appear only once);
keys are the field names, the flag spelling with dashes (``otlp-grpc``) is accepted too.
Unknown flag or file keys are errors; unknown ``RCA_*`` variables are ignored, and an empty
variable counts as unset. Errors are `ConfigError` and name the key and where it came from.

The file alone may hold a ``[metrics]`` table whose ``[[metrics.map]]`` entries extend or override
the built-in metric table (`rca.telemetry.metric_table`).
"""

from __future__ import annotations

import difflib
import ipaddress
import math
import tomllib
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rca.telemetry.metric_table import MetricRule, parse_rules


class ConfigError(ValueError):
    """A startup configuration error; the message names the key and its source."""


@dataclass(frozen=True, slots=True)
class HostPort:
    """A listen address; port 0 means any free port."""

    host: str
    port: int

    @classmethod
    def parse(cls, text: str) -> HostPort:
        """Parse ``HOST:PORT`` or ``[IPV6]:PORT``; raises ValueError."""
        host, sep, port = text.strip().rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
            try:
                ipaddress.IPv6Address(host)
            except ValueError:
                raise ValueError(f"{text!r} has an invalid IPv6 host") from None
        elif ":" in host:
            raise ValueError(f"{text!r} is not HOST:PORT (write IPv6 hosts as [::1]:PORT)")
        if not sep or not host or not port.isascii() or not port.isdigit():
            raise ValueError(f"{text!r} is not HOST:PORT")
        if any(c.isspace() or c in "/[]@" for c in host):
            raise ValueError(f"{text!r} has an invalid host")
        if int(port) > 65535:
            raise ValueError(f"{text!r}: port must be 0..65535")
        return cls(host, int(port))

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def is_loopback(self) -> bool:
        """Whether the host is localhost, 127.0.0.0/8 or ::1."""
        if self.host.lower() == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything `rca serve` is configured with."""

    otlp_grpc: HostPort = HostPort("127.0.0.1", 4317)
    otlp_http: HostPort = HostPort("127.0.0.1", 4318)
    http: HostPort = HostPort("127.0.0.1", 8080)
    db: str = "sqlite:///./rca-data/rca.db"
    api_token: str | None = None
    window_seconds: float = 10.0
    retention_seconds: float = 900.0
    ingest_queue: int = 64
    max_message_bytes: int = 64 * 1024 * 1024
    lookback_seconds: float = 300.0
    params: Path | None = None  # the health-model parameters; None: the shipped ones
    prometheus_url: str | None = None  # a Prometheus-compatible query API rankings also read
    prometheus_timeout_seconds: float = 2.0
    metric_rules: tuple[MetricRule, ...] = ()  # the config file's [metrics] map entries

    def listens_beyond_loopback(self) -> bool:
        """Whether any listener is reachable from other hosts."""
        return not all(a.is_loopback() for a in (self.otlp_grpc, self.otlp_http, self.http))


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {type(value).__name__} {value!r}")
    return value


def _hostport(value: object) -> HostPort:
    return HostPort.parse(_text(value))


def _db(value: object) -> str:
    url = _text(value).strip()
    if "://" not in url:
        raise ValueError(f"{url!r} is not a database URL (e.g. sqlite:///./rca.db)")
    return url


def _token(value: object) -> str:
    token = _text(value)
    if not token or any(c.isspace() for c in token):  # never echo the secret
        raise ValueError("the token must be non-empty and contain no whitespace")
    return token


def _http_url(value: object) -> str:
    """An http(s) URL with a host, without a trailing slash (paths such as ``/prometheus`` kept)."""
    url = _text(value).strip()
    try:
        parts = urllib.parse.urlsplit(url)
        _ = parts.port  # raises on a bad port
    except ValueError as exc:
        raise ValueError(f"{url!r} is not a URL: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r} is not an http(s) URL (e.g. http://prometheus:9090)")
    if parts.query or parts.fragment:
        raise ValueError(f"{url!r}: give the base URL, without query or fragment")
    return url.rstrip("/")


def _params(value: object) -> Path:
    """A parameters file, read and checked now: a bad one is a startup error, not a failed ranking."""
    from models.params_file import read_params  # the model package knows the file; imported when given

    path = Path(_text(value)).expanduser()
    read_params(path)
    return path


def _number(kind: type[int] | type[float], minimum: float, strict: bool = False) -> Callable[[object], Any]:
    def convert(value: object) -> int | float:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise ValueError(f"expected a number, got {type(value).__name__} {value!r}")
        if kind is int and isinstance(value, float):
            raise ValueError(f"{value!r} is not an integer")
        try:
            number = kind(value)
        except ValueError:
            what = "an integer" if kind is int else "a number"
            raise ValueError(f"{value!r} is not {what}") from None
        if not math.isfinite(number):
            raise ValueError(f"{value!r} is not finite")
        if number < minimum or (strict and number == minimum):
            raise ValueError(f"{value!r} must be {'>' if strict else '>='} {minimum:g}")
        return number

    return convert


# key -> (converter, metavar, help); the default comes from Settings.
_FIELDS: dict[str, tuple[Callable[[object], Any], str, str]] = {
    "otlp_grpc": (_hostport, "HOST:PORT", "OTLP/gRPC listen address"),
    "otlp_http": (_hostport, "HOST:PORT", "OTLP/HTTP listen address"),
    "http": (_hostport, "HOST:PORT", "HTTP API listen address"),
    "db": (_db, "URL", "database URL (sqlite:/// embedded, postgresql:// for PostgreSQL)"),
    "api_token": (_token, "TOKEN", "bearer token required by the API"),
    "window_seconds": (_number(float, 0, strict=True), "SECONDS", "graph window length"),
    "retention_seconds": (_number(float, 0), "SECONDS", "span history kept (>= window)"),
    "ingest_queue": (_number(int, 1), "BATCHES", "ingest queue depth before 503/UNAVAILABLE"),
    "max_message_bytes": (_number(int, 1024), "BYTES", "largest accepted OTLP message"),
    "lookback_seconds": (_number(float, 0), "SECONDS", "incident look-back before first alert"),
    "params": (_params, "FILE", "health-model parameters, as rca fit writes them"),
    "prometheus_url": (_http_url, "URL", "Prometheus-compatible query API that rankings also read"),
    "prometheus_timeout_seconds": (_number(float, 0, strict=True), "SECONDS", "timeout of each Prometheus query"),
}
_DEFAULTS = Settings()
FLAG_NAMES: tuple[str, ...] = (*_FIELDS, "config")
FLAG_METAVARS: Mapping[str, str] = {k: v[1] for k, v in _FIELDS.items()} | {"config": "FILE"}


_UNSET_MEANS = {"api_token": "none (no auth)", "params": "the shipped ones"}


def _default_text(key: str) -> str:
    value = getattr(_DEFAULTS, key)
    return _UNSET_MEANS.get(key, "none") if value is None else str(value)


flag_help: Mapping[str, str] = {
    **{k: f"{v[2]} (env RCA_{k.upper()}, default {_default_text(k)})" for k, v in _FIELDS.items()},
    "config": "TOML file holding any of these options (env RCA_CONFIG, default none)",
}


METRIC_RULES = "metric_rules"


def _metric_rules(table: object, path: Path) -> tuple[MetricRule, ...]:
    """The entries of the file's ``[metrics]`` table (only ``map`` in it)."""
    if not isinstance(table, dict):
        raise ConfigError(f"'metrics' in {path} must be a table")
    unknown = set(table) - {"map"}
    if unknown:
        raise ConfigError(f"unknown key(s) {', '.join(sorted(unknown))} in [metrics] of {path} (expected map)")
    try:
        return parse_rules(table.get("map", []), f"[metrics] map in {path}")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _read_file(path: Path) -> dict[str, object]:
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} not found") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML in {path}: {exc}") from None
    rules = _metric_rules(data.pop("metrics"), path) if "metrics" in data else ()
    serve = data.pop("serve", {})
    if not isinstance(serve, dict):
        raise ConfigError(f"'serve' in {path} must be a table")
    values: dict[str, object] = {}
    for key, value in [*data.items(), *serve.items()]:
        name = key.replace("-", "_")
        if name not in _FIELDS:
            hint = difflib.get_close_matches(name, _FIELDS, n=1)
            extra = f" (did you mean {hint[0]!r}?)" if hint else ""
            raise ConfigError(f"unknown key {key!r} in {path}{extra}")
        if name in values:
            raise ConfigError(f"key {name!r} given twice in {path}")
        values[name] = value
    values[METRIC_RULES] = rules  # not a setting of flags or variables: the file's alone
    return values


def load_settings(flags: Mapping[str, str | None], environ: Mapping[str, str]) -> Settings:
    """Resolve settings from CLI flags (None = not given), environment and config file."""
    given: dict[str, str] = {}
    for key, value in flags.items():
        name = key.lstrip("-").replace("-", "_")
        if name not in FLAG_NAMES:
            raise ConfigError(f"unknown flag key {key!r}")
        if value is not None:
            given[name] = value
    config = given.pop("config", None)
    config = config if config is not None else environ.get("RCA_CONFIG") or None
    path = Path(config).expanduser() if config is not None else None
    in_file = _read_file(path) if path is not None else {}
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name, (convert, _, _) in _FIELDS.items():
        env = f"RCA_{name.upper()}"
        raw: object
        if name in given:
            raw, source = given[name], "--" + name.replace("_", "-")
        elif environ.get(env):
            raw, source = environ[env], env
        elif name in in_file:
            raw, source = in_file[name], str(path)
        else:
            values[name], sources[name] = getattr(_DEFAULTS, name), "default"
            continue
        try:
            values[name], sources[name] = convert(raw), source
        except ValueError as exc:
            raise ConfigError(f"invalid value for {name} (from {source}): {exc}") from None
    rules = in_file.get(METRIC_RULES, ())
    assert isinstance(rules, tuple)
    settings = Settings(**values, metric_rules=rules)
    if settings.retention_seconds < settings.window_seconds:
        raise ConfigError(
            f"retention_seconds ({settings.retention_seconds:g}, from "
            f"{sources['retention_seconds']}) must be >= window_seconds "
            f"({settings.window_seconds:g}, from {sources['window_seconds']})"
        )
    return settings
