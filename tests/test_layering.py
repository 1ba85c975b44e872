"""Dependencies point one way: the core imports no transport, web or wire-type libraries."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN_IN_CORE = (
    "grpc",
    "fastapi",
    "pydantic",
    "starlette",
    "uvicorn",
    "google",
    "opentelemetry",
    "httpx",
    "ingest",
    "api",
)
COMPOSITION_ROOTS = {"compose.py"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_core_modules_import_no_adapters_or_wire_types() -> None:
    core = [p for p in (ROOT / "rca").rglob("*.py") if p.name not in COMPOSITION_ROOTS]
    assert len(core) > 10
    offenders = {p.name: sorted(_imports(p) & set(FORBIDDEN_IN_CORE)) for p in core}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_adapters_do_not_import_each_other() -> None:
    for package, other in (("ingest", "api"), ("api", "ingest")):
        for path in (ROOT / package).rglob("*.py"):
            assert other not in _imports(path), f"{path} imports {other}"
