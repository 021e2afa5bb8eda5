"""The house's floors (docs/architecture.md, "Layers"): every import of every module (at the top, inside
functions, under TYPE_CHECKING) points to its own floor or one below, but for the deliberate
exceptions the page lists; and no imports close a circle. The floors are read from the page, so
they are written down once."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "flashbed"
DOC = ROOT / "docs" / "architecture.md"


@dataclass(frozen=True)
class Import:
    module: str  # the importer, as a path under src/flashbed ("cell.py", "studies/__init__.py")
    line: int
    target: str  # the module imported, as a path


def _section(text: str, title: str) -> str:
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert m, f"docs/architecture.md has no '## {title}' section"
    return m.group(1)


def floors() -> list[tuple[str, list[str]]]:
    """The floors from the bottom: (name, its entries: `x.py` a module, `x/` a package and all under it)."""
    out = []
    for row in re.findall(r"^\| *(\d+ [^|]*?) *\| *(.*?) *\|$", _section(DOC.read_text(), "Layers"), re.M):
        out.append((row[0], re.findall(r"`([^`]+)`", row[1])))
    assert [int(name.split()[0]) for name, _ in out] == list(range(1, len(out) + 1)), "floors numbered 1, 2, ..."
    return out


def exceptions() -> set[tuple[str, str]]:
    """The deliberate upward imports the page lists: "- `a.py` imports `b.py`"."""
    return set(re.findall(r"^- `([^`]+)` imports `([^`]+)`", _section(DOC.read_text(), "Layers"), re.M))


def modules() -> dict[str, Path]:
    return {p.relative_to(SRC).as_posix(): p for p in sorted(SRC.rglob("*.py"))}


def _resolve(dotted: str, mods: dict[str, Path]) -> str | None:
    """A dotted name under flashbed as a module path (the longest prefix that is a module or a package)."""
    parts = dotted.split(".")[1:]
    while True:
        for cand in ("/".join(parts) + ".py", "/".join(parts + ["__init__.py"])):
            if cand in mods and (parts or cand == "__init__.py"):
                return cand
        if not parts:
            return None
        parts = parts[:-1]


def imports(mods: dict[str, Path]) -> list[Import]:
    """Every import of flashbed's own modules, wherever in the module it is made."""
    out = []
    for rel, path in mods.items():
        package = ["flashbed", *Path(rel).parent.parts]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = package[:len(package) - node.level + 1] if node.level else []
                full = ".".join(base + ([node.module] if node.module else []))
                # `from . import x` imports the module x when there is one, else a name of the package
                names = [f"{full}.{a.name}" if _resolve(f"{full}.{a.name}", mods) not in (None, _resolve(full, mods))
                         else full for a in node.names]
            for name in names:
                if name == "flashbed" or name.startswith("flashbed."):
                    target = _resolve(name, mods)
                    if target is not None and target != rel:
                        out.append(Import(rel, node.lineno, target))
    return out


def floor_of(module: str, table: list[tuple[str, list[str]]]) -> int:
    """The module's floor: the entry naming it itself, else the longest package entry holding it."""
    best: tuple[int, int] | None = None  # (how specific, floor)
    for i, (_, entries) in enumerate(table):
        for e in entries:
            if e == module:
                return i
            if e.endswith("/") and module.startswith(e) and (best is None or len(e) > best[0]):
                best = (len(e), i)
    assert best is not None, f"src/flashbed/{module} is on no floor: add it to docs/architecture.md's Layers table"
    return best[1]


def upward(table: list[tuple[str, list[str]]], found: list[Import]) -> list[Import]:
    return [i for i in found if floor_of(i.target, table) > floor_of(i.module, table)]


def circles(found: list[Import]) -> list[set[str]]:
    """The import graph's strongly connected components of more than one module (Tarjan)."""
    graph: dict[str, set[str]] = {}
    for i in found:
        graph.setdefault(i.module, set()).add(i.target)
        graph.setdefault(i.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(comp)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


@pytest.fixture(scope="module")
def found() -> list[Import]:
    return imports(modules())


def test_every_module_is_on_a_floor():
    table = floors()
    for m in modules():
        floor_of(m, table)


def test_no_module_imports_from_a_floor_above_its_own(found):
    table = floors()
    allowed = exceptions()
    bad = [f"src/flashbed/{i.module}:{i.line} imports {i.target}: floor '{table[floor_of(i.module, table)][0]}' "
           f"imports floor '{table[floor_of(i.target, table)][0]}', above it"
           for i in upward(table, found) if (i.module, i.target) not in allowed]
    assert not bad, "imports that run uphill (docs/architecture.md, Layers):\n" + "\n".join(bad)


def test_the_listed_exceptions_still_occur(found):
    """A deliberate exception that no longer occurs is struck from the page's list."""
    occur = {(i.module, i.target) for i in upward(floors(), found)}
    assert exceptions() <= occur, f"listed but gone: {sorted(exceptions() - occur)}"


def test_no_imports_close_a_circle(found):
    bad = circles(found)
    assert not bad, "import circles:\n" + "\n".join(" <-> ".join(sorted(c)) for c in bad)


def test_the_check_sees_imports_in_functions_and_under_type_checking(tmp_path):
    """The reader is not fooled by where an import is made: one inside a function and one under
    TYPE_CHECKING count as the module's imports."""
    src = {"a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n",
           "b.py": "def f():\n    from . import a\n", "c/__init__.py": "", "c/d.py": "from .. import b\n"}
    mods = {}
    for rel, text in src.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
        mods[rel] = tmp_path / rel
    got = {(i.module, i.target) for i in imports(mods)}
    assert got == {("a.py", "b.py"), ("b.py", "a.py"), ("c/d.py", "b.py")}
    assert circles(imports(mods)) == [{"a.py", "b.py"}]
    table = [("1 low", ["b.py", "c/"]), ("2 high", ["a.py"])]
    assert [(i.module, i.target) for i in upward(table, imports(mods))] == [("b.py", "a.py")]
