"""The package's shape, as docs/architecture.md draws it: layers, no circles, no peeking.

The layer table is read from docs/architecture.md, so the page and the code cannot
drift apart. Every import of the package is walked with ``ast`` — ``TYPE_CHECKING``
imports and imports inside functions included — and checked:

* it points to the importer's own layer or below;
* no two modules import each other, directly or round a circle;
* no module reads another module's private attribute (``obj._x``, ``getattr(obj, "_x")``,
  and ``self._x`` too, where no class of the reading module defines ``_x``).

Size is no rule: one concept per module. A module past 800 lines is named on the terminal
as worth a look, never failed.

Each exception is listed below with its reason.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import trio_session

PACKAGE = Path(trio_session.__file__).parent
ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"
#: Past this many lines a module is named as worth a look (a hint, not a cap).
LONG_MODULE = 800

#: Import edges allowed to close a circle, each with why it stays for now.
CIRCLE_EDGES: dict[tuple[str, str], str] = {}

#: Upward imports allowed, each with its reason (the circle edges are upward too).
UPWARD = dict(CIRCLE_EDGES)

#: ``(reading module, private attribute)`` pairs allowed, each with its reason.
PRIVATE_READS = {
    ("trio_session.providers._http_body", "_get_content_decoder"): (
        "httpx decodes a body it was handed raw only through this helper of its Response"
    ),
    ("trio_session.tui._render", "_color_system"): (
        "rich's Console says which colours it found only through this attribute"
    ),
    ("trio_session.providers._pool", "_transport"): (
        "httpx's AsyncClient names its default transport (for pool_stats) only here"
    ),
    ("trio_session.providers._pool", "_mounts"): (
        "httpx's AsyncClient names its proxy transports (for pool_stats) only here"
    ),
    ("trio_session.providers._pool", "_pool"): (
        "httpx's AsyncHTTPTransport names its httpcore pool (for pool_stats) only here"
    ),
    ("trio_session.providers._pool", "_requests"): (
        "httpcore's pool names the requests waiting for a connection only here"
    ),
    # ``self._x`` of a base class in another module: a subclass calling its base's hook.
    **{
        ("trio_session._retry.classify", name): "PatternClassifier uses PatternRules' hooks"
        for name in ("_from_table", "_overflow_of", "_retryable")
    },
    **{
        (f"trio_session.providers.{module}", "_root"): "an HTTP provider's base URL, its base's"
        for module in ("_anthropic", "_gemini", "_openai")
    },
    # ``self._x`` of the class a mixin is mixed into: another object's private state in all
    # but name. AgentSession's went with issue 40 (the facade by composition); this one
    # is left: TreeAppends is one concept of SessionFile split out, not a collaborator.
    **{
        ("trio_session.store._tree_appends", name): "TreeAppends, a mixin of SessionFile"
        for name in ("_stage", "_ids", "_last_staged", "_last_id")
    },
}

#: Reads of private names of other libraries' modules (not of our classes).
FOREIGN_PRIVATE = {"_getframe", "_exit", "_current_frames", "_asdict", "_replace", "_fields"}


# -- the package ------------------------------------------------------------------------


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> Iterator[str]:
    """Every module of the package ``name`` imports, wherever the import statement is."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                yield sub if sub in MODULES else target
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name


def _graph() -> dict[str, set[str]]:
    return {
        name: {t for t in _imports(name, path) if t in MODULES and t != name}
        for name, path in MODULES.items()
    }


GRAPH = _graph()


# -- the layers, from docs/architecture.md ---------------------------------------------------


def _layer_table() -> list[tuple[str, list[str]]]:
    text = ARCHITECTURE.read_text(encoding="utf-8")
    table = text.split("<!-- layers: begin")[1].split("<!-- layers: end")[0]
    layers = []
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0][:1].isdigit():
            layers.append((cells[0], re.findall(r"`([^`]+)`", cells[1])))
    return layers


def _layer_of(module: str, table: list[tuple[str, list[str]]]) -> list[int]:
    short = module.removeprefix("trio_session.") if module != "trio_session" else module
    hits = []
    for index, (_, patterns) in enumerate(table):
        for pattern in patterns:
            if pattern.endswith(".*"):
                stem = pattern[:-2]
                if short.startswith(stem + ".") and short.count(".") == stem.count(".") + 1:
                    hits.append(index)
            elif short == pattern:
                hits.append(index)
    return hits


LAYERS = _layer_table()


def test_the_layer_table_is_read() -> None:
    """docs/architecture.md's table is found: seven layers, the policy's modules in them."""
    assert [name.split()[0] for name, _ in LAYERS] == ["0", "1", "2", "3", "4", "5", "6"]
    assert _layer_of("trio_session._retry.controller", LAYERS) == [3]
    assert _layer_of("trio_session._retry.classify", LAYERS) == [0]


def test_every_module_is_in_exactly_one_layer() -> None:
    """A new module must be placed in docs/architecture.md's table, once."""
    misplaced = {m: _layer_of(m, LAYERS) for m in MODULES if len(_layer_of(m, LAYERS)) != 1}
    assert misplaced == {}


def test_imports_point_down() -> None:
    """No module imports one of a higher layer (``TYPE_CHECKING`` imports included)."""
    up = [
        f"{source} (layer {_layer_of(source, LAYERS)[0]}) imports {target} "
        f"(layer {_layer_of(target, LAYERS)[0]})"
        for source, targets in GRAPH.items()
        for target in sorted(targets)
        if _layer_of(target, LAYERS)[0] > _layer_of(source, LAYERS)[0]
        and (source, target) not in UPWARD
    ]
    assert up == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circles() -> None:
    """No two modules import each other, directly or round a circle (the package's
    ``__init__`` files, which re-export, aside)."""
    graph = {
        source: {
            t for t in targets if (source, t) not in CIRCLE_EDGES and not _reexports(t, source)
        }
        for source, targets in GRAPH.items()
    }
    assert _cycles(graph) == []


def _reexports(target: str, source: str) -> bool:
    """``source`` imports the package ``target`` it belongs to: a package's ``__init__``
    re-exports its modules, which is not a dependency of theirs on each other."""
    return MODULES[target].name == "__init__.py" and source.startswith(target + ".")


def test_the_circle_finder_finds_a_circle() -> None:
    """The check can fail: a two-module circle and a three-module one are found."""
    graph = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c"}, "f": set()}
    assert _cycles(graph) == [["a", "b"], ["c", "d", "e"]]


def test_every_allowed_circle_edge_still_exists() -> None:
    """An allowlist entry whose import is gone must go too."""
    assert [edge for edge in CIRCLE_EDGES if edge[1] not in GRAPH[edge[0]]] == []


def _scope_tree(text: str) -> str:
    start = text.index("```text\nAgentSession.prompt()")
    return text[start : text.index("```", start + 8)]


def test_the_scope_tree_is_the_same_in_the_docs_and_the_policy() -> None:
    """docs/architecture.md draws the tree trio_session/_retry/__init__.py draws (the one
    ``PromptController.run`` builds), character for character."""
    policy = (PACKAGE / "_retry" / "__init__.py").read_text(encoding="utf-8")
    assert _scope_tree(ARCHITECTURE.read_text(encoding="utf-8")) == _scope_tree(policy)


# -- private attributes ------------------------------------------------------------------


def _own_names(tree: ast.Module) -> set[str]:
    """Private names a module's own classes define: fields, methods, ``self._x`` targets."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    names.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
                elif isinstance(item, ast.Assign):
                    names.update(t.id for t in item.targets if isinstance(t, ast.Name))
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id in {"self", "cls"}
        ):
            names.add(node.attr)
    return {n for n in names if n.startswith("_")}


def _private_reads(source: str, *, mixin: bool = True) -> Iterator[tuple[int, str]]:
    """Reads of private names no class of the module defines (``mixin=False``: not
    counting ``self._x``, the rule before issue 40)."""
    tree = ast.parse(source)
    own = _own_names(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            attr = node.attr
            base = node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in {"getattr", "hasattr"}
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            attr = node.args[1].value
            base = node.args[0]
        else:
            continue
        if not attr.startswith("_") or attr.startswith("__") or attr in own:
            continue
        # ``self._x`` is the module's own state only where a class of the module defines
        # ``_x``: a mixin reading its host's private field reads another object's state.
        if isinstance(base, ast.Name) and base.id in {"self", "cls"} and not mixin:
            continue
        if attr in FOREIGN_PRIVATE:
            continue
        yield node.lineno, attr


def test_no_module_reads_another_modules_private_attributes() -> None:
    """``obj._x`` only for ``self``/``cls`` or a name a class of the same module defines."""
    reads = [
        f"{module}:{line} ._{attr.lstrip('_')}"
        for module, path in MODULES.items()
        for line, attr in _private_reads(path.read_text(encoding="utf-8"))
        if (module, attr) not in PRIVATE_READS
    ]
    assert reads == []


def test_the_private_read_rule_can_fail() -> None:
    """A read of another class's private attribute is found, and so is ``self._x`` where
    no class of the module defines ``_x`` (a mixin reading its host's state); the same
    module's own ``_x`` is not."""
    source = (
        "class A:\n"
        "    _mine: int\n"
        "    def f(self, other, b):\n"
        "        return self._x, other._mine, b._theirs, getattr(b, '_hidden'), self._mine\n"
    )
    assert list(_private_reads(source)) == [(4, "_x"), (4, "_theirs"), (4, "_hidden")]


def test_every_allowed_private_read_still_happens() -> None:
    """An allowlist entry that no longer matches a read must go too."""
    happening = {
        (module, attr)
        for module, path in MODULES.items()
        for _, attr in _private_reads(path.read_text(encoding="utf-8"))
    }
    assert set(PRIVATE_READS) - happening == set()


# -- size ---------------------------------------------------------------------------------


def test_module_size_is_a_hint(capsys: pytest.CaptureFixture[str]) -> None:
    """No line cap (issue 40): one concept per module, whatever its length. A module past
    ``LONG_MODULE`` lines is named on the terminal as worth a look, never failed."""
    long = {
        module: lines
        for module, path in MODULES.items()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > LONG_MODULE
    }
    with capsys.disabled():
        for module, lines in sorted(long.items()):
            print(f"\nnote: {module} has {lines} lines: does it still hold one concept?")
