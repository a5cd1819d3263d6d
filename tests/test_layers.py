"""The house in layers (design/architecture.md): each package imports only the ones below it,
no import circles, one owner per resource, short functions, empty package ``__init__`` files."""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parents[1] / "app"
# The data flow, bottom up. `install` sits beside `act`: it writes other programs' settings and
# needs only the base and the adapters.
RANK = {"base": 0, "adapters": 1, "observe": 2, "act": 3, "install": 3, "run": 4, "front": 5}
NEIGHBOURS_FORBIDDEN = {("install", "observe"), ("install", "act"), ("act", "install")}
# Each outside resource has one owning module (or package).
OWNERS = {
    "libtmux": ("app.adapters.tmux",),
    "sqlite3": ("app.adapters.store", "app.adapters.store_read", "app.adapters.store_tables"),
    "sqlite_utils": ("app.adapters.store", "app.adapters.migrations"),
    "requests": ("app.adapters.llm",),
}
MAX_TOP_MODULES = 8
MAX_FUNCTION_LINES = 100
MAX_MODULE_LINES = 700
MAX_CLASS_METHODS = 25
# Over the limits today, each for a reason of its own; nothing else may be.
LONG_MODULES: set[str] = set()
BIG_CLASSES: set[str] = set()
# Each part of a pane's memory (app.observe.pane.Tracked) has one writer: the modules that may
# assign its fields or change its rows in place. Tracked itself may only start a part afresh.
PART_WRITERS = {
    "Screen": ("app.observe.pane",),  # PaneObserver.classify
    "Looks": ("app.run.clock",),
    "Stored": ("app.run.watcher",),
    "News": ("app.run.telling",),
}
_ROW_MUTATORS = frozenset({"update", "pop", "setdefault", "clear", "popitem", "__setitem__"})


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(APP.rglob("*.py")):
        parts = path.relative_to(APP.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports(path: Path, known: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """Every module of ours or outside package imported anywhere in the file (lazy ones too)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                yield (full if full in known else node.module), node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno


def layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "app" and len(parts) > 1 and parts[1] in RANK else None


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: {m for m, _ in imports(path, known) if m in known and m != name}
            for name, path in known.items()}


def test_every_import_runs_downward() -> None:
    known = modules()
    wrong = []
    for name, path in known.items():
        mine = layer(name)
        for target, line in imports(path, known):
            theirs = layer(target)
            if mine is None or theirs is None or mine == theirs:
                continue
            if RANK[theirs] > RANK[mine] or (mine, theirs) in NEIGHBOURS_FORBIDDEN:
                wrong.append(f"{path.relative_to(APP.parent)}:{line} {name} -> {target}")
    assert wrong == []


def test_no_import_circles() -> None:
    edges = graph()
    circles = []
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in edges:
        if node not in index:
            visit(node)
    assert circles == []


def test_each_outside_resource_has_one_owner() -> None:
    known = modules()
    strays = []
    for name, path in known.items():
        for target, line in imports(path, known):
            package = target.split(".")[0]
            if package in OWNERS and name not in OWNERS[package]:
                strays.append(f"{path.relative_to(APP.parent)}:{line} imports {target}")
    assert strays == []


def test_the_watcher_imports_no_step() -> None:
    watcher = graph()["app.run.watcher"]
    assert not {m for m in watcher if m.startswith(("app.act.herd", "app.act.cycle"))}


def test_few_modules_loose_at_the_top() -> None:
    top = [p.name for p in APP.glob("*.py")]
    assert len(top) <= MAX_TOP_MODULES, top


@pytest.mark.parametrize("init", sorted(APP.rglob("__init__.py")), ids=lambda p: str(p))
def test_package_init_files_import_nothing(init: Path) -> None:
    # `status --short` and `hook` must import only what they use.
    tree = ast.parse(init.read_text(encoding="utf-8"))
    assert not [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]


def test_no_function_over_a_hundred_lines() -> None:
    long = []
    for path in modules().values():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(APP.parent)}:{node.lineno} {node.name} "
                                f"({lines} lines)")
    assert long == []


def test_no_module_over_seven_hundred_lines() -> None:
    long = []
    for path in modules().values():
        name = str(path.relative_to(APP.parent))
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_MODULE_LINES and name not in LONG_MODULES:
            long.append(f"{name} ({lines} lines)")
    assert long == []


def test_no_class_over_twenty_five_methods() -> None:
    big = []
    for module, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            methods = [f for f in node.body
                       if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))]
            if len(methods) > MAX_CLASS_METHODS and f"{module}.{node.name}" not in BIG_CLASSES:
                big.append(f"{module}.{node.name} ({len(methods)} methods)")
    assert big == []


def _part_fields() -> tuple[dict[str, str], dict[str, str]]:
    """Field name -> the Tracked part (class name) it belongs to; Tracked's attribute holding a
    part (``looks``) -> that part."""
    from app.observe import pane

    fields = {f.name: part for part in PART_WRITERS
              for f in dataclasses.fields(getattr(pane, part))}
    holders = {f.name: str(f.type) for f in dataclasses.fields(pane.Tracked)
               if str(f.type) in PART_WRITERS}
    return fields, holders


def _writes(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """The attribute names a module assigns (``x.attr = ...``, also augmented or unpacked), or
    whose value it changes in place (``x.attr[k] = ...``, ``x.attr.update(...)``)."""
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in _ROW_MUTATORS \
                and isinstance(node.func.value, ast.Attribute):
            yield node.func.value.attr, line
        while targets:
            target = targets.pop()
            if isinstance(target, (ast.Tuple, ast.List)):
                targets.extend(target.elts)
            elif isinstance(target, ast.Attribute) and not (
                    isinstance(target.value, ast.Name) and target.value.id == "self"):
                # An object's own attributes (``self.text``) are not a pane's: a part is
                # reached through the pane (``tracked.screen.text``) or a name for it.
                yield target.attr, line
            elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Attribute):
                yield target.value.attr, line


def test_the_parts_of_a_panes_memory_are_written_only_by_their_owners() -> None:
    fields, holders = _part_fields()
    assert {"captured_at", "status_row", "told"} <= fields.keys()
    assert set(holders.values()) == set(PART_WRITERS)
    strays = []
    for module, path in modules().items():
        for attr, line in _writes(ast.parse(path.read_text(encoding="utf-8"))):
            part = fields.get(attr) or holders.get(attr)
            if part is None or module in PART_WRITERS[part]:
                continue
            if module == "app.observe.pane" and attr in holders:
                continue  # Tracked starting a part afresh (forget_screen)
            strays.append(f"{path.relative_to(APP.parent)}:{line} writes {part}.{attr}")
    assert strays == []


# `conductor pty status --short` runs in tmux's status line every few seconds per client: besides
# our own store reader and renderer it may load only these (the stdlib's sqlite3 and what it pulls
# in). A module added here costs every refresh its import time; see scripts/bench.py's start-up.
STATUS_LINE_OUTSIDE_MODULES = frozenset({
    "sqlite3", "sqlite3.dbapi2", "_sqlite3", "datetime", "_datetime", "math", "fcntl",
    "collections.abc", "encodings.ascii",
})
_NEW_MODULES = """\
import sys
before = set(sys.modules)
from app.entry import main
main(["--workers-dir", sys.argv[1], "pty", "status", "--short"])
print(" ".join(sorted(set(sys.modules) - before)))
"""


def test_the_status_line_loads_only_the_store_reader_and_sqlite(tmp_path: Path) -> None:
    import subprocess
    import sys

    from app.adapters.store import StoreWriter

    StoreWriter(tmp_path).close()  # a real store: the line reads it rather than "no store"
    done = subprocess.run([sys.executable, "-c", _NEW_MODULES, str(tmp_path)],
                          capture_output=True, text=True, timeout=60, check=True)
    line, loaded = done.stdout.splitlines()
    assert line.startswith("[conductor:")
    outside = {name for name in loaded.split() if name.split(".")[0] != "app"}
    assert outside <= STATUS_LINE_OUTSIDE_MODULES, sorted(outside - STATUS_LINE_OUTSIDE_MODULES)
    assert "app.front.cli.main" not in loaded.split()
