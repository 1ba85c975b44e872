"""Log records: the columnar form every log decoder produces and the graph consumes.

One row per record. `service` indexes `strings` (the node the record belongs to,
docs/interface.md, Logs); bodies stay one string per record, since the template miner reads them. Severity is
OTLP's SeverityNumber (1–24, 0 unspecified); `infer_severity` fills it in from the severity
text or the body where the sender gave no number.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from rca.telemetry.alerts import strip_pod_suffix
from rca.telemetry.spans import Rejection, Rejections

SEVERITY_WARN = 13  # OTLP SeverityNumber: WARN is 13–16, ERROR 17–20, FATAL 21–24
SEVERITY_ERROR = 17
_TEXT_SEVERITY = {
    "TRACE": 1,
    "DEBUG": 5,
    "INFO": 9,
    "NOTICE": 10,
    "WARN": 13,
    "WARNING": 13,
    "ERROR": 17,
    "ERR": 17,
    "SEVERE": 17,
    "CRITICAL": 21,
    "FATAL": 21,
    "PANIC": 21,
}
# A body names its own level where a logger wrote it in the line's head (`2023-01-29 08:43:04
# WARN 1 --- [main] ...`, `[warn]`, klog's `W0129`): that level stands. Without one, an exception
# or a stack trace is an error, and so is an error word near the start.
_HEAD_CHARS = 80
_HEAD_LEVEL = re.compile(
    r"(?<![\w./-])(TRACE|DEBUG|INFO|NOTICE|WARN(?:ING)?|ERROR|SEVERE|CRITICAL|FATAL|PANIC)(?![\w./-])"
    r"|\[(trace|debug|info|warn|warning|error|fatal)\]"
    r"|\blevel=[\"']?(\w+)",  # logfmt (logrus' text formatter, Go's slog)
)
_KLOG_HEAD = re.compile(r"([IWEF])\d{4} \d{2}:\d{2}:\d{2}")
_KLOG_SEVERITY = {"I": 9, "W": 13, "E": 17, "F": 21}
# a stack trace, whole or one frame per record (a file tailed without multiline joining)
_BODY_ERROR = re.compile(
    r"Exception\b|Traceback \(most recent|(?:^|\n)\s+at \S+\(|^Caused by: |^\s*\.\.\. \d+ more"
    r"|^\s+File \".*\", line \d+"
)
# an exception's class (`NullPointerException`, `KeyError`), a Python traceback, a Go panic or
# the word error ("ignoring error from …", "error ignored: …": one swallowed and logged at WARN):
# what makes a template an error template whatever level it was logged at
_ERROR_REPORT = re.compile(r"\w(?:Exception|Error)\b|Traceback \(most recent|\bpanic: |(?i:\berror\b)")
_BODY_WARN = re.compile(r"\bWARN(?:ING)?\b", re.IGNORECASE)
_BODY_ERROR_WORD = re.compile(r"\b(?:error|fatal|critical)\b", re.IGNORECASE)
# A structured logger's line (zap, logrus, bunyan, pino, logback's JSON encoder, structlog) or a
# map body as text: the message and the level are fields of a JSON object.
MESSAGE_KEYS = ("msg", "message", "@message", "event", "log")
LEVEL_KEYS = ("level", "severity", "lvl", "levelname", "log.level", "@level", "loglevel")
_NUMERIC_LEVELS = ((60, "FATAL"), (50, "ERROR"), (40, "WARN"), (30, "INFO"), (20, "DEBUG"), (10, "TRACE"))  # pino


SERVICE_NAME = "service.name"
DEPLOYMENT_NAME = "k8s.deployment.name"
POD_NAME = "k8s.pod.name"
LOG_RESOURCE_KEYS = frozenset({SERVICE_NAME, DEPLOYMENT_NAME, POD_NAME})
UNKNOWN_SERVICE = "unknown_service"


def log_service(resource: Mapping[str, object]) -> str:
    """The node a resource's records belong to: `service.name`, else `k8s.deployment.name`, else
    `k8s.pod.name` without its replica-set suffix (docs/interface.md, Logs)."""
    for key in (SERVICE_NAME, DEPLOYMENT_NAME):
        value = resource.get(key)
        if isinstance(value, str) and value:
            return value
    pod = resource.get(POD_NAME)
    return strip_pod_suffix(pod) if isinstance(pod, str) and pod else UNKNOWN_SERVICE


@dataclass(frozen=True, slots=True)
class LogBatch:
    """Columnar log records; `trace_id` and `span_id` are 0 where a record names no span."""

    time_ns: npt.NDArray[np.int64]  # event time: the record's time, else when it was observed
    service: npt.NDArray[np.int32]  # index into `strings`
    trace_id: npt.NDArray[np.uint64]  # (n, 2): high and low 64 bits
    span_id: npt.NDArray[np.uint64]
    severity: npt.NDArray[np.int8]  # SeverityNumber, inferred where the sender gave none
    body: tuple[str, ...]
    strings: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.time_ns.shape[0])

    @property
    def is_error(self) -> npt.NDArray[np.bool_]:
        result: npt.NDArray[np.bool_] = self.severity >= SEVERITY_ERROR
        return result

    @staticmethod
    def empty() -> LogBatch:
        return LogBatch(
            time_ns=np.zeros(0, np.int64),
            service=np.zeros(0, np.int32),
            trace_id=np.zeros((0, 2), np.uint64),
            span_id=np.zeros(0, np.uint64),
            severity=np.zeros(0, np.int8),
            body=(),
            strings=(),
        )

    def select(self, mask: npt.NDArray[np.bool_]) -> LogBatch:
        """The rows where `mask` holds, sharing the string table."""
        return LogBatch(
            time_ns=self.time_ns[mask],
            service=self.service[mask],
            trace_id=self.trace_id[mask],
            span_id=self.span_id[mask],
            severity=self.severity[mask],
            body=tuple(b for b, keep in zip(self.body, mask.tolist(), strict=True) if keep),
            strings=self.strings,
        )


def concat_logs(batches: Sequence[LogBatch]) -> LogBatch:
    """One batch holding the rows of all `batches`, their string tables laid end to end."""
    if len(batches) == 1:
        return batches[0]
    offsets = np.cumsum([0, *(len(b.strings) for b in batches[:-1])]).tolist()
    return LogBatch(
        time_ns=np.concatenate([b.time_ns for b in batches]),
        service=np.concatenate([b.service + np.int32(o) for b, o in zip(batches, offsets, strict=True)]),
        trace_id=np.concatenate([b.trace_id for b in batches]),
        span_id=np.concatenate([b.span_id for b in batches]),
        severity=np.concatenate([b.severity for b in batches]),
        body=tuple(text for b in batches for text in b.body),
        strings=tuple(s for b in batches for s in b.strings),
    )


def severity_of_text(text: str) -> int:
    """The SeverityNumber a severity text names (`ERROR`, `warn`, `Information`…), 0 if none."""
    word = text.strip().upper()
    if word in _TEXT_SEVERITY:
        return _TEXT_SEVERITY[word]
    for prefix, number in (("INFO", 9), ("WARN", 13), ("ERR", 17), ("FATAL", 21), ("DEBUG", 5), ("TRACE", 1)):
        if word.startswith(prefix):
            return number
    return 0


def severity_of_body(body: str) -> int:
    """The severity a body shows by itself: the level its logger wrote in the line's head where
    it names one; else an exception, a stack trace or an error word is ERROR, a warning word
    WARN, anything else INFO."""
    head = body[:_HEAD_CHARS]
    named = _HEAD_LEVEL.search(head)
    if named:
        return severity_of_text(named[1] or named[2] or named[3])
    klog = _KLOG_HEAD.match(head)
    if klog:
        return _KLOG_SEVERITY[klog[1]]
    if _BODY_ERROR.search(body) or _BODY_ERROR_WORD.search(body[:200]):
        return SEVERITY_ERROR
    if _BODY_WARN.search(body[:200]):
        return SEVERITY_WARN
    return 9


def reports_error(body: str) -> bool:
    """Whether a body (or a template) reports an error: names an exception, a traceback or a
    panic, or says error in words."""
    return _ERROR_REPORT.search(body) is not None


def structured(body: str) -> tuple[str, str]:
    """(message, level text) of a body that is a JSON object with a message field (a structured
    logger's line, `MESSAGE_KEYS`; its level from `LEVEL_KEYS`, pino's numbers included); the
    body itself and "" for any other body. Templates are made of the message: an object's keys
    and values, masked, would make every line of a logger one template."""
    if not body.startswith("{"):
        return body, ""
    try:
        value = json.loads(body)
    except ValueError:
        return body, ""
    if not isinstance(value, dict):
        return body, ""
    message = next((m for key in MESSAGE_KEYS if isinstance(m := value.get(key), str) and m.strip()), None)
    if message is None:
        return body, ""
    level = next((v for key in LEVEL_KEYS if (v := value.get(key)) is not None and v != ""), "")
    if isinstance(level, int | float) and not isinstance(level, bool):
        level = next((name for floor, name in _NUMERIC_LEVELS if level >= floor), "")
    return message.rstrip("\n"), level if isinstance(level, str) else ""


def infer_severity(number: npt.NDArray[np.int64], text: Sequence[str], body: Sequence[str]) -> npt.NDArray[np.int8]:
    """Each record's SeverityNumber: the one sent (clipped to 0–24), else its severity text's,
    else what its body shows (docs/interface.md, Logs)."""
    out = np.clip(number, 0, 24).astype(np.int8)
    for i in np.flatnonzero(out == 0).tolist():
        out[i] = severity_of_text(text[i]) if text[i] else 0
        if out[i] == 0:
            out[i] = severity_of_body(body[i])
    return out


@dataclass(frozen=True, slots=True)
class LogDecodeResult(Rejections):
    """What a log decoder made of one request: the accepted records and the rejected ones."""

    UNIT: ClassVar[str] = "log record"
    batch: LogBatch
    rejections: tuple[Rejection, ...] = ()
