"""Dependencies point one way. The core's packages stack (`CORE`, bottom first): each imports only
those below it. The core imports no adapter, tool, model or wire-type library; `rca.app`, the
composition root, is the one place that imports everything. Adapters do not import each other."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = ("rca.telemetry", "rca.graph", "rca.evidence", "rca.ranking", "rca.incidents")
ADAPTERS = ("ingest", "api", "storage")
TOOLS = ("simulation", "benchmarks")
FORBIDDEN_IN_CORE = (
    *ADAPTERS,
    *TOOLS,
    "models",
    "grpc",
    "fastapi",
    "pydantic",
    "starlette",
    "uvicorn",
    "google",
    "opentelemetry",
    "httpx",
    "sqlalchemy",
    "torch",
    "pyro",
)


def _imports(path: Path) -> set[str]:
    """Every absolute module a file imports, type-only imports included."""
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _files(package: str) -> list[Path]:
    files = sorted((ROOT / package.replace(".", "/")).rglob("*.py"))
    assert files, f"{package} has no modules"
    return files


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_rca_holds_the_core_packages_and_the_app_only() -> None:
    packages = {p.name for p in (ROOT / "rca").iterdir() if (p / "__init__.py").exists()}
    modules = {p.name for p in (ROOT / "rca").glob("*.py")}
    assert packages == {name.split(".")[1] for name in CORE} | {"app"}
    assert modules == {"__init__.py"}


def test_core_packages_import_only_the_packages_below_them() -> None:
    for level, package in enumerate(CORE):
        above = CORE[level + 1 :]
        for path in _files(package):
            imports = _imports(path)
            wrong = sorted(m for m in imports if any(_within(m, p) for p in above) or _within(m, "rca.app"))
            assert not wrong, f"{path.relative_to(ROOT)} imports {wrong}, above {package}"


def test_core_imports_no_adapter_tool_model_or_wire_types() -> None:
    for package in CORE:
        for path in _files(package):
            wrong = sorted({m.split(".")[0] for m in _imports(path)} & set(FORBIDDEN_IN_CORE))
            assert not wrong, f"{path.relative_to(ROOT)} imports {wrong}"


def test_adapters_do_not_import_each_other_or_the_app() -> None:
    for package in ADAPTERS:
        others = {*ADAPTERS, *TOOLS} - {package}
        for path in _files(package):
            tops = {m.split(".")[0] for m in _imports(path)}
            assert not tops & others, f"{path.relative_to(ROOT)} imports {sorted(tops & others)}"
            assert not any(_within(m, "rca.app") for m in _imports(path)), path


def test_models_know_the_core_types_and_no_adapter() -> None:
    for path in _files("models"):
        imports = _imports(path)
        tops = {m.split(".")[0] for m in imports}
        assert not tops & {"ingest", "api", "benchmarks"}, f"{path.relative_to(ROOT)} imports {sorted(tops)}"
        assert not any(_within(m, "rca.app") for m in imports), path


def test_the_check_sees_a_type_only_arrow(tmp_path: Path) -> None:
    """The checks above read imports as written, type-only ones included."""
    path = tmp_path / "probe.py"
    path.write_text("if TYPE_CHECKING:\n    from rca.incidents.model import Incident\nimport storage.sql as s\n")
    assert _imports(path) == {"rca.incidents.model", "storage.sql"}
