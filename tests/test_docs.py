"""The docs stay true: every module the README, the architecture and the interface pages name
exists (and so does the class or function a dotted name goes on to), the README stays a short page
that keeps the quick start, and every relative link in the README and `docs/` resolves."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("rca", "ingest", "models", "api", "storage", "simulation", "benchmarks", "tests")
FOLDERS = (*PACKAGES, "docs", "grafana", "fixtures")
NAMING_PAGES = ("README.md", "docs/architecture.md", "docs/interface.md")
LINKING_PAGES = ("README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")))
README_MAX_LINES = 200

_TOP = "|".join(PACKAGES)
# `rca/graph/service_graph.py`, `ingest/otlp_logs*.py` (a glob), `rca/telemetry/metric_table.toml`;
# not part of a longer path or a URL.
FILE_PATH = re.compile(rf"(?<![\w./-])((?:{'|'.join(FOLDERS)})/[\w/*.-]*\.[A-Za-z]\w*)\b")
# `rca.graph.service_graph.ServiceGraph`, `models.structure`; not `./rca-data/rca.db` or `rca.toml`.
DOTTED_NAME = re.compile(rf"(?<![\w./-])((?:{_TOP})(?:\.[A-Za-z_]\w*)+)")
FILE_SUFFIXES = frozenset({"py", "toml", "db", "json", "yaml", "yml", "md", "pb", "svg", "png", "txt"})
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^[ \t]*```.*?^[ \t]*```", re.M | re.S)


def _read(page: str) -> str:
    return (ROOT / page).read_text(encoding="utf-8")


def _defined(body: list[ast.stmt]) -> set[str]:
    """Names a module or class body defines or imports at its top level."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _module_file(parts: list[str]) -> Path | None:
    base = ROOT.joinpath(*parts)
    for candidate in (base.parent / f"{base.name}.py", base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def dotted_name_problem(name: str) -> str | None:
    """Why a dotted name (`package.module[.attribute[.member]]`) does not exist, or None."""
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        module = _module_file(parts[:k])
        if module is not None:
            break
    else:
        return f"no module {'.'.join(parts[:2])}"
    rest = parts[k:]
    if not rest:
        return None
    body = _tree(module).body
    if rest[0] not in _defined(body) and _module_file([*parts[:k], rest[0]]) is None:
        return f"{module.relative_to(ROOT)} defines no {rest[0]}"
    classes = {n.name: n for n in body if isinstance(n, ast.ClassDef)}
    if len(rest) > 1 and rest[0] in classes and rest[1] not in _defined(classes[rest[0]].body):
        return f"class {rest[0]} in {module.relative_to(ROOT)} defines no {rest[1]}"
    return None


def named_modules(text: str) -> tuple[set[str], set[str]]:
    """The file paths and the dotted names a page names."""
    paths = set(FILE_PATH.findall(text))
    dotted = {n for n in DOTTED_NAME.findall(text) if n.rsplit(".", 1)[1] not in FILE_SUFFIXES}
    return paths, dotted


@pytest.mark.parametrize("page", NAMING_PAGES)
def test_every_module_the_page_names_exists(page: str) -> None:
    paths, dotted = named_modules(_read(page))
    missing = sorted(p for p in paths if not any(ROOT.glob(p)))
    assert not missing, f"{page} names files that do not exist: {missing}"
    wrong = sorted(f"{n}: {why}" for n in dotted if (why := dotted_name_problem(n)) is not None)
    assert not wrong, f"{page} names modules or attributes that do not exist: {wrong}"


def test_the_check_catches_what_is_gone() -> None:
    paths, dotted = named_modules(_read("docs/architecture.md"))
    assert len(paths) >= 10 and len(dotted) >= 10, "the architecture page names modules: the patterns miss them"
    paths, dotted = named_modules("see `rca/no_such_module.py`, `rca.graph.NoSuchClass` and `rca.nowhere`")
    assert paths == {"rca/no_such_module.py"} and not any(ROOT.glob("rca/no_such_module.py"))
    assert dotted_name_problem("rca.graph.NoSuchClass") is not None
    assert dotted_name_problem("rca.nowhere") is not None
    assert dotted_name_problem("rca.graph.service_graph.ServiceGraph") is None
    assert named_modules("sqlite:///./rca-data/rca.db and --config rca.toml") == (set(), set())


def test_readme_is_short_and_keeps_the_quick_start() -> None:
    text = _read("README.md")
    assert len(text.splitlines()) <= README_MAX_LINES
    assert "make demo" in text and "make test" in text


@pytest.mark.parametrize("page", LINKING_PAGES)
def test_every_relative_link_resolves(page: str) -> None:
    text = FENCE.sub("", _read(page))
    base = (ROOT / page).parent
    targets = [t.split("#", 1)[0] for t in LINK.findall(text)]
    relative = [t for t in targets if t and "://" not in t and not t.startswith("mailto:")]
    broken = sorted(t for t in relative if not (base / t).exists())
    assert not broken, f"{page} links to missing files: {broken}"
