"""Synthetic OTLP log export requests for benchmarks: application log lines of a few dozen
templates whose numbers, ids and names vary record to record, some written inside a span."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from benchmarks.payload import SERVICES

RECORDS_PER_REQUEST = 1000
IN_SPAN = 0.4  # share of records carrying a trace and span id
ERROR, WARN, INFO = 17, 13, 9
_FIELDS: dict[str, Callable[[random.Random], str]] = {
    "id": lambda r: str(r.randrange(10_000, 99_999_999)),
    "uuid": lambda r: str(uuid.UUID(int=r.getrandbits(128))),
    "n": lambda r: str(r.randrange(1, 40)),
    "ms": lambda r: str(r.randrange(1, 5000)),
    "amount": lambda r: f"{r.uniform(1, 900):.2f}",
    "ip": lambda r: f"10.{r.randrange(256)}.{r.randrange(256)}.{r.randrange(1, 255)}",
    "hash": lambda r: f"{r.getrandbits(48):012x}",
    "user": lambda r: r.choice(("alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi")),
    "host": lambda r: f"node-{r.randrange(64):02d}",
}
# (severity, template): about 100 characters once filled in
TEMPLATES: tuple[tuple[int, str], ...] = (
    (INFO, "Started processing order {id} for customer {uuid} with {n} items totalling {amount} EUR"),
    (INFO, "HTTP GET /api/v1/products/{id} completed with status 200 in {ms} ms from client {ip}"),
    (INFO, "HTTP POST /api/v1/cart/{uuid}/items completed with status 201 in {ms} ms user={user}"),
    (INFO, "User {user} logged in from {ip} using session {hash}, previous login {n} days ago"),
    (INFO, "Cache lookup for key product:{id}:details hit in {ms} us on shard {n} of host {host}"),
    (INFO, "Cache miss for key cart:{uuid}, loading from database took {ms} ms (attempt {n})"),
    (INFO, "Payment {uuid} authorised for {amount} EUR by provider stripe in {ms} ms, ref {hash}"),
    (INFO, "Shipment {id} created for order {id} with carrier dhl, {n} parcels, eta {n} days"),
    (INFO, "Inventory reserved: product {id} quantity {n} for order {id}, remaining stock {id}"),
    (INFO, "Sending confirmation email to {user}@example.com for order {id} via smtp relay {host}"),
    (INFO, "Kafka consumer group orders-processor committed offset {id} on partition {n} in {ms} ms"),
    (INFO, "Recommendation model returned {n} products for user {user} in {ms} ms (model v{n})"),
    (INFO, "Currency conversion from USD to EUR at rate 0.{id} for amount {amount}, quote {hash}"),
    (INFO, "Connection pool db-primary: {n} active, {n} idle, {n} waiting; acquired in {ms} ms"),
    (INFO, "Scheduled job cleanup-expired-carts removed {id} carts older than {n} hours in {ms} ms"),
    (INFO, "gRPC call /hipstershop.ProductCatalogService/GetProduct from {ip} finished in {ms} ms"),
    (INFO, "Feature flag new-checkout-flow evaluated to true for user {user} (bucket {n} of 100)"),
    (INFO, "Request {uuid} routed to upstream {ip}:8080 after {n} retries, total latency {ms} ms"),
    (INFO, "Search query for term shoes size {n} returned {id} results in {ms} ms from index v{n}"),
    (INFO, "Loaded configuration revision {hash} from consul at {host}, {n} keys changed, {ms} ms"),
    (INFO, "Ad service selected {n} ads for context category-{n}, auction took {ms} ms, id {hash}"),
    (INFO, "Order {id} status changed from PENDING to CONFIRMED by worker {host} after {ms} ms"),
    (INFO, "Health check of dependency redis-cart at {ip}:6379 succeeded in {ms} ms on {host}"),
    (INFO, "Token {hash} refreshed for client mobile-app-{n}, expires in {id} seconds for {user}"),
    (INFO, "Batch of {n} events flushed to analytics pipeline in {ms} ms, queue depth now {id}"),
    (INFO, "Product {id} price updated from {amount} to {amount} EUR by pricing rule {hash}"),
    (INFO, "Session {hash} for user {user} extended by {n} minutes, {n} requests in this session"),
    (INFO, "Rendering page /product/{id} for user {user} took {ms} ms with {n} widgets on {host}"),
    (WARN, "Slow query detected on orders table: {ms} ms for customer {uuid}, rows examined {id}"),
    (WARN, "Retrying call to payment provider after timeout of {ms} ms, attempt {n} of 5, ref {hash}"),
    (WARN, "Rate limit approaching for API key {hash}: {id} requests in the last {n} minutes"),
    (WARN, "Circuit breaker for shipping-quote half-open after {n} failures, next probe in {ms} ms"),
    (WARN, "Deprecated endpoint /api/v0/cart/{uuid} called by client {ip}, user agent curl/{n}"),
    (WARN, "Memory usage of worker {host} at {n}% of limit, {id} objects in cache, gc took {ms} ms"),
    (ERROR, "Failed to charge card for order {id}: provider returned code {n}, ref {hash}, {ms} ms"),
    (ERROR, "Database connection to {ip}:5432 lost after {ms} ms, reconnecting (attempt {n}) from {host}"),
    (ERROR, "java.lang.NullPointerException: cart {uuid} has no items at CartService.checkout:{n}"),
    (ERROR, "Timeout after {ms} ms waiting for inventory-service response for order {id}, request {uuid}"),
    (ERROR, "Unhandled exception in request {uuid}: KeyError 'shipping_address' for user {user}"),
    (ERROR, "Order {id} could not be placed: stock for product {id} exhausted ({n} requested)"),
)
# most lines are routine, a few warnings and errors, as in a healthy service
_WEIGHTS = [40 if severity == INFO else 4 if severity == WARN else 1 for severity, _ in TEMPLATES]


def _fill(template: str, rng: random.Random) -> str:
    out, rest = [], template
    while "{" in rest:
        head, _, tail = rest.partition("{")
        name, _, rest = tail.partition("}")
        out += [head, _FIELDS[name](rng)]
    return "".join([*out, rest])


def log_export_requests(count: int, records_per_request: int, start_ns: int, seed: int = 11,
                        spread_ns: int = 60_000_000_000) -> list[bytes]:  # fmt: skip
    """`count` serialized requests of `records_per_request` records each, from 4 services per
    request, one after the other over `spread_ns` of event time (a minute)."""
    rng = random.Random(seed)
    step_ns = spread_ns // (count * records_per_request)
    out = []
    for r in range(count):
        request = ExportLogsServiceRequest()
        per_service = records_per_request // 4
        for s in range(4):
            resource_logs = request.resource_logs.add()
            for key, value in (("service.name", SERVICES[(r + s) % len(SERVICES)]), ("host.name", f"node-{s}")):
                kv = resource_logs.resource.attributes.add()
                kv.key, kv.value.string_value = key, value
            scope = resource_logs.scope_logs.add()
            scope.scope.name = "app.logger"
            for i in range(per_service):
                severity, template = rng.choices(TEMPLATES, _WEIGHTS)[0]
                record = scope.log_records.add()
                record.time_unix_nano = start_ns + ((r * 4 + s) * per_service + i) * step_ns
                record.observed_time_unix_nano = record.time_unix_nano + 1_000_000
                record.severity_number = severity
                record.severity_text = {INFO: "INFO", WARN: "WARN", ERROR: "ERROR"}[severity]
                record.body.string_value = _fill(template, rng)
                if rng.random() < IN_SPAN:
                    record.trace_id, record.span_id = rng.randbytes(16), rng.randbytes(8)
                kv = record.attributes.add()
                kv.key, kv.value.string_value = "thread.name", f"worker-{i % 16}"
        out.append(request.SerializeToString())
    return out
