"""A bounded soak test of `rca serve` on loopback: `python -m benchmarks.soak --seconds N`.

Spans of a simulated shop go over OTLP/gRPC at a target rate (re-timed round after round, so
event time moves on and the graph's retention keeps evicting), optionally log records beside them
(`--log-rate`, `benchmarks.log_payload`, on the same event-time clock), with an Alertmanager
webhook every few seconds (a new firing alert, and the previous one resolved). Clients retry
UNAVAILABLE like an OTLP exporter. It samples the server's RSS, times each webhook, and at the end
compares the spans and records acknowledged to the server with those it counted (`/metrics`): none
may be lost. It stops by itself and prints a JSON report (RSS over time, webhook p50/p95 per
minute, span and record counts).
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import grpc
import httpx
import numpy as np
import numpy.typing as npt
from prometheus_client.parser import text_string_to_metric_families

from benchmarks.log_payload import RECORDS_PER_REQUEST, log_export_requests
from benchmarks.serve_process import launch
from ingest import otlp_fields as fields
from ingest.otlp_encode import encode_batch
from ingest.otlp_signals import LOGS, TRACES, AnySignal
from rca.telemetry.alerts import format_rfc3339
from simulation import simulate

METHOD = f"/{TRACES.grpc_service}/Export"
RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED)


@dataclass(frozen=True)
class Exported:
    """What the server said to one export, after retries: records accepted and rejected."""

    accepted: int
    rejected: int
    retries: int


def export(call: grpc.UnaryUnaryMultiCallable, body: bytes, records: int, *, max_retries: int = 10_000,
           signal: AnySignal = TRACES) -> Exported:  # fmt: skip
    """Sends one export of `signal`, retrying UNAVAILABLE (as OTLP exporters do, with a short backoff)."""
    for attempt in range(max_retries + 1):
        try:
            reply = signal.response.FromString(call(body, timeout=30))
        except grpc.RpcError as exc:
            if exc.code() not in RETRYABLE or attempt == max_retries:
                raise
            time.sleep(min(0.2, 0.005 * (attempt + 1)))
            continue
        rejected = int(getattr(reply.partial_success, signal.rejected_field))
        return Exported(records - rejected, rejected, attempt)
    raise AssertionError("unreachable")


def server_metrics(api: str, headers: dict[str, str] | None = None) -> dict[str, float]:
    """`GET /metrics` as {sample name with labels: value}."""
    text = httpx.get(f"{api}/metrics", headers=headers, timeout=30).text
    found: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            found[f"{sample.name}{{{labels}}}" if labels else sample.name] = float(sample.value)
    return found


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise OSError(f"no VmRSS for process {pid}")


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def _fields(buf: bytes, start: int, end: int) -> Iterator[tuple[int, int, int]]:
    """(field number, value start, value end) of each protobuf field in `buf[start:end]`."""
    pos = start
    while pos < end:
        key, pos = _varint(buf, pos)
        wire = key & 7
        if wire == 0:
            _, after = _varint(buf, pos)
        elif wire in (1, 5):
            after = pos + (8 if wire == 1 else 4)
        elif wire == 2:
            length, pos = _varint(buf, pos)
            after = pos + length
        else:
            raise ValueError(f"unexpected wire type {wire} at byte {pos}")
        yield key >> 3, pos, after
        pos = after


@dataclass(frozen=True)
class RecordLayout:
    """Where a signal's records keep their fixed64 times (the first one is the event time) and
    their ids, as field numbers of the record message (request → resource → scope → record)."""

    times: tuple[int, ...]
    ids: tuple[int, ...]


SPAN_LAYOUT = RecordLayout(
    times=(fields.SPAN_START_TIME, fields.SPAN_END_TIME),
    ids=(fields.SPAN_TRACE_ID, fields.SPAN_SPAN_ID, fields.SPAN_PARENT_SPAN_ID),
)
LOG_LAYOUT = RecordLayout(
    times=(fields.LOG_TIME, fields.LOG_OBSERVED_TIME), ids=(fields.LOG_TRACE_ID, fields.LOG_SPAN_ID)
)


@dataclass(frozen=True)
class Template:
    """One serialized export request and where its records' times and ids lie in the bytes, so a
    round's copy is made by patching bytes with numpy instead of rebuilding protobuf objects."""

    body: npt.NDArray[np.uint8]
    times: npt.NDArray[np.intp]  # (n, 8) byte indices of the fixed64 times
    id_prefixes: npt.NDArray[np.intp]  # (m, 4) byte indices of the first 4 bytes of each id
    records: int
    newest_ns: int  # the latest event time

    @classmethod
    def of(cls, body: bytes, layout: RecordLayout = SPAN_LAYOUT) -> Template:
        times, prefixes, records, newest = [], [], 0, 0
        for r_field, r_start, r_end in _fields(body, 0, len(body)):
            if r_field != fields.REQUEST_RESOURCES:
                continue
            for s_field, s_start, s_end in _fields(body, r_start, r_end):
                if s_field != fields.RESOURCE_SCOPES:
                    continue
                for x_field, x_start, x_end in _fields(body, s_start, s_end):
                    if x_field != fields.SCOPE_RECORDS:
                        continue
                    records += 1
                    for number, start, end in _fields(body, x_start, x_end):
                        if number in layout.ids and end > start:
                            prefixes.append(start)
                        elif number in layout.times:
                            times.append(start)
                            if number == layout.times[0]:
                                newest = max(newest, int.from_bytes(body[start:end], "little"))
        return cls(
            body=np.frombuffer(body, dtype=np.uint8),
            times=np.asarray(times, dtype=np.intp)[:, None] + np.arange(8),
            id_prefixes=np.asarray(prefixes, dtype=np.intp)[:, None] + np.arange(4),
            records=records,
            newest_ns=newest,
        )

    def shifted(self, shift_ns: int, id_prefix: bytes) -> bytes:
        """The request moved `shift_ns` on in event time, every id starting with `id_prefix`."""
        body = self.body.copy()
        moved = body[self.times].view("<u8") + np.uint64(shift_ns)
        body[self.times] = moved.view(np.uint8).reshape(-1, 8)
        body[self.id_prefixes] = np.frombuffer(id_prefix, dtype=np.uint8)
        return body.tobytes()


class EndlessTraffic:
    """A simulated case's requests, re-timed and re-identified without end. Each request is sent
    as `copies` copies with distinct ids, so that at `spans_per_s` event time keeps pace with the
    clock; round r moves every span `r` case-lengths on in event time."""

    def __init__(self, spans_per_s: float, *, scenario: str = "boutique-latency", seed: int = 1,
                 requests_per_s: float = 20.0, max_spans: int = 512) -> None:  # fmt: skip
        case = simulate(scenario, seed=seed, rate=requests_per_s)
        templates = [Template.of(m) for b in case.batches for m in encode_batch(b, max_spans)]
        self._pace(templates, case.start_ns, case.end_ns - case.start_ns, spans_per_s)

    def _pace(self, templates: list[Template], start_ns: int, period_ns: int, per_s: float) -> None:
        self.templates = templates
        self.start_ns = start_ns
        self.period_ns = period_ns
        per_round = sum(t.records for t in self.templates)
        self.copies = max(1, round(per_s * self.period_ns / 1e9 / per_round))
        self.newest_ns = self.start_ns
        self._lock = threading.Lock()

    def requests(self) -> Iterator[tuple[bytes, int]]:
        """(request bytes, records) forever."""
        for round_ in range(1, 1 << 30):
            shift = round_ * self.period_ns
            for template in self.templates:
                with self._lock:
                    self.newest_ns = max(self.newest_ns, template.newest_ns + shift)
                for copy in range(self.copies):
                    prefix = (round_ * self.copies + copy).to_bytes(4, "big")
                    yield template.shifted(shift, prefix), template.records


class LogTraffic(EndlessTraffic):
    """Application log records (`benchmarks.log_payload`) paced the same way, on the event-time
    clock of span traffic that starts at `start_ns` and moves `period_ns` on a round; the ids they
    carry name no span of that traffic."""

    def __init__(self, records_per_s: float, start_ns: int, period_ns: int, *, requests: int = 64) -> None:
        bodies = log_export_requests(requests, RECORDS_PER_REQUEST, start_ns, spread_ns=period_ns)
        self._pace([Template.of(b, LOG_LAYOUT) for b in bodies], start_ns, period_ns, records_per_s)


@dataclass
class Counts:
    """What the server acknowledged of one signal's exports."""

    acked: int = 0
    rejected: int = 0
    requests: int = 0
    retries: int = 0
    failures: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass(frozen=True)
class WebhookTiming:
    at_s: float
    ms: float
    status: int


@dataclass(frozen=True)
class SoakReport:
    seconds: float
    target_spans_per_s: float
    achieved_spans_per_s: float
    acked_spans: int
    received_spans: int
    graph_spans: int
    lost_spans: int
    rejected_spans: int
    target_log_records_per_s: float
    achieved_log_records_per_s: float
    acked_log_records: int
    received_log_records: int
    graph_log_records: int
    lost_log_records: int
    rejected_log_records: int
    export_requests: int
    export_retries: int
    refused_overload: int
    webhooks: int
    webhook_errors: int
    webhook_minutes: list[dict[str, float]]
    rss_mb: list[tuple[float, float]]  # (seconds since start, MB)
    rss_middle_third_mb: float
    rss_last_third_mb: float
    server_exit: int
    failures: list[str]


def _send(traffic: Iterator[tuple[bytes, int]], feed: threading.Lock, address: str, rate: float,
          started: float, counts: Counts, stop: threading.Event, signal: AnySignal = TRACES) -> None:  # fmt: skip
    with grpc.insecure_channel(address) as channel:
        call = channel.unary_unary(f"/{signal.grpc_service}/Export")
        while not stop.is_set():
            with feed:
                body, records = next(traffic)
                with counts.lock:
                    offered = counts.acked + counts.rejected
                wait = offered / rate - (time.monotonic() - started)
            if wait > 0:
                time.sleep(wait)
            try:
                result = export(call, body, records, signal=signal)
            except grpc.RpcError as exc:
                with counts.lock:
                    counts.failures.append(f"export: {exc.code()}: {exc.details()}")
                return
            with counts.lock:
                counts.acked += result.accepted
                counts.rejected += result.rejected
                counts.requests += 1
                counts.retries += result.retries


def _alert(fingerprint: str, status: str, starts_ns: int) -> dict[str, object]:
    return {
        "status": status,
        "labels": {"alertname": "HighLatency", "service": "frontend", "severity": "warning"},
        "annotations": {"summary": "soak"},
        "startsAt": format_rfc3339(starts_ns),
        "endsAt": format_rfc3339(starts_ns + 1) if status == "resolved" else "0001-01-01T00:00:00Z",
        "fingerprint": fingerprint,
    }


def _webhooks(api: str, traffic: EndlessTraffic, every_s: float, started: float, timings: list[WebhookTiming],
              stop: threading.Event) -> None:  # fmt: skip
    previous: dict[str, object] | None = None
    with httpx.Client(timeout=30) as client:
        for k in range(1 << 30):
            if stop.wait(every_s):
                return
            alert = _alert(f"soak{k:08x}", "firing", traffic.newest_ns)
            alerts = [alert] + ([{**previous, "status": "resolved", "endsAt": alert["startsAt"]}] if previous else [])
            body = {"version": "4", "status": "firing", "receiver": "rca", "alerts": alerts}
            sent = time.perf_counter()
            try:
                status = client.post(f"{api}/webhooks/alertmanager", json=body).status_code
            except httpx.HTTPError:
                status = 0
            ms = (time.perf_counter() - sent) * 1000
            timings.append(WebhookTiming(time.monotonic() - started, ms, status))
            previous = alert


def _minutes(timings: Sequence[WebhookTiming]) -> list[dict[str, float]]:
    rows = []
    for minute in sorted({int(t.at_s // 60) for t in timings}):
        ms = [t.ms for t in timings if int(t.at_s // 60) == minute and t.status == 200]
        if ms:
            p50, p95 = np.percentile(ms, [50, 95])
            rows.append({"minute": minute, "webhooks": len(ms), "p50_ms": float(p50), "p95_ms": float(p95)})
    return rows


def _thirds(samples: Sequence[tuple[float, float]], seconds: float) -> tuple[float, float]:
    middle = [mb for t, mb in samples if seconds / 3 <= t < 2 * seconds / 3]
    last = [mb for t, mb in samples if t >= 2 * seconds / 3]
    return statistics.fmean(middle or [0.0]), statistics.fmean(last or [0.0])


def _drained(api: str, deadline_s: float = 60.0) -> dict[str, float]:
    """Metrics once the graph has every received span and log record (or the deadline has passed)."""
    end = time.monotonic() + deadline_s
    while True:
        found = server_metrics(api)
        spans = found.get("rca_graph_spans_total", 0.0) + found.get("rca_graph_late_spans_total", 0.0)
        logs = found.get("rca_graph_log_records_total", 0.0) + found.get("rca_graph_late_log_records_total", 0.0)
        received = found.get("rca_spans_received_total", 0.0), found.get("rca_log_records_received_total", 0.0)
        if (spans, logs) >= received or time.monotonic() > end:
            return found
        time.sleep(0.2)


def run(seconds: float, rate: float, *, webhook_every_s: float = 2.0, senders: int = 2, log_rate: float = 0.0,
        serve_args: Sequence[str] = (), db_dir: Path | None = None) -> SoakReport:  # fmt: skip
    """Runs the soak for `seconds` against a fresh `rca serve` and returns its report; `log_rate`
    log records/s go beside the spans, from a sender of their own."""
    traffic = EndlessTraffic(rate)
    directory = db_dir or Path.cwd() / "rca-data" / "soak"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "soak.db").unlink(missing_ok=True)
    process, announced = launch("--db", f"sqlite:///{directory}/soak.db", *serve_args)
    api = f"http://{announced['http']}"
    counts, logs, timings, rss = Counts(), Counts(), list[WebhookTiming](), list[tuple[float, float]]()
    stop, feed, stream = threading.Event(), threading.Lock(), traffic.requests()
    started = time.monotonic()
    address = announced["otlp_grpc"]
    threads = [
        threading.Thread(target=_send, args=(stream, feed, address, rate, started, counts, stop))
        for _ in range(senders)
    ]
    if log_rate > 0:
        records = LogTraffic(log_rate, traffic.start_ns, traffic.period_ns).requests()
        log_args = (records, threading.Lock(), address, log_rate, started, logs, stop, LOGS)
        threads.append(threading.Thread(target=_send, args=log_args))
    threads.append(threading.Thread(target=_webhooks, args=(api, traffic, webhook_every_s, started, timings, stop)))
    try:
        for thread in threads:
            thread.start()
        while (elapsed := time.monotonic() - started) < seconds and process.poll() is None:
            rss.append((round(elapsed, 2), rss_bytes(process.pid) / 1e6))
            time.sleep(min(1.0, max(0.1, seconds / 120)))
        stop.set()
        for thread in threads:
            thread.join(60)
        wall = time.monotonic() - started
        found = _drained(api)
    finally:
        stop.set()
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        try:
            exit_code = process.wait(timeout=30)
        except Exception:
            process.kill()
            exit_code = process.wait()
    received = int(found.get("rca_spans_received_total", 0))
    received_logs = int(found.get("rca_log_records_received_total", 0))
    middle, last = _thirds(rss, seconds)
    return SoakReport(
        seconds=round(wall, 1),
        target_spans_per_s=rate,
        achieved_spans_per_s=round(counts.acked / wall, 1),
        acked_spans=counts.acked,
        received_spans=received,
        graph_spans=int(found.get("rca_graph_spans_total", 0)),
        lost_spans=counts.acked - received,
        rejected_spans=counts.rejected,
        target_log_records_per_s=log_rate,
        achieved_log_records_per_s=round(logs.acked / wall, 1),
        acked_log_records=logs.acked,
        received_log_records=received_logs,
        graph_log_records=int(found.get("rca_graph_log_records_total", 0)),
        lost_log_records=logs.acked - received_logs,
        rejected_log_records=logs.rejected,
        export_requests=counts.requests + logs.requests,
        export_retries=counts.retries + logs.retries,
        refused_overload=int(found.get("rca_otlp_requests_refused_total{reason=overload}", 0)),
        webhooks=sum(t.status == 200 for t in timings),
        webhook_errors=sum(t.status != 200 for t in timings),
        webhook_minutes=_minutes(timings),
        rss_mb=[(t, round(mb, 1)) for t, mb in rss],
        rss_middle_third_mb=round(middle, 1),
        rss_last_third_mb=round(last, 1),
        server_exit=exit_code,
        failures=counts.failures + logs.failures,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.soak", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=600.0, help="how long to run (default 600)")
    parser.add_argument("--rate", type=float, default=100_000.0, help="target spans/s over OTLP/gRPC (default 100k)")
    parser.add_argument("--log-rate", type=float, default=0.0, help="target log records/s beside them (default 0)")
    parser.add_argument("--webhook-every", type=float, default=2.0, help="seconds between webhooks")
    parser.add_argument("--ingest-queue", type=int, default=None, help="rca serve --ingest-queue")
    parser.add_argument("--retention-seconds", type=float, default=None, help="rca serve --retention-seconds")
    parser.add_argument("--report", type=Path, default=None, help="write the JSON report here too")
    args = parser.parse_args(argv)
    extra = ["--ingest-queue", str(args.ingest_queue)] if args.ingest_queue else []
    extra += ["--retention-seconds", str(args.retention_seconds)] if args.retention_seconds else []
    report = run(args.seconds, args.rate, webhook_every_s=args.webhook_every, log_rate=args.log_rate, serve_args=extra)
    text = json.dumps(asdict(report), indent=1)
    if args.report:
        args.report.write_text(text + "\n")
    print(text)
    lost = report.lost_spans or report.lost_log_records
    ok = not lost and report.webhook_errors == 0 and not report.failures and report.server_exit == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
