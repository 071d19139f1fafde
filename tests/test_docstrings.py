"""Docstrings are written for the API reference: one style, and none missing.

The reference (``docs/reference/``) is generated from docstrings by mkdocstrings with
griffe's Google parser and rendered as Markdown. reStructuredText markup there shows up
raw: a Sphinx role (``:class:`X` ``) as its colons and backticks, a ``::`` literal block
as prose with the code run into it. So every docstring of the package, private modules
included (their objects are re-exported), is checked for that markup; every public name
needs a docstring; and every public name needs a place in the reference pages.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import attrs
import pytest

import trio_session

PACKAGE = Path(trio_session.__file__).parent
REFERENCE = Path(__file__).parent.parent / "docs" / "reference"

#: The modules whose ``__all__`` is the public API.
PUBLIC_MODULES = ("trio_session", "trio_session.rpc", "trio_session.testing")

#: ``:class:`X` ``, ``:py:meth:`X` `` …, and the field lists ``:param x:``, ``:returns:``.
SPHINX_ROLE = re.compile(r":(?:py:)?[a-z]+:`|^\s*:(?:param|type|returns?|rtype|raises?)\b", re.M)
#: A line ending in ``::`` starts a reStructuredText literal block; ``.. x::`` a directive.
LITERAL_BLOCK = re.compile(r"::\s*$|^\s*\.\. [a-z-]+::", re.M)
#: A Google section header: a known name, then a colon, alone on its line.
SECTION_NAMES = (
    "Args|Arguments|Parameters|Params|Attributes|Returns|Return|Raises|Yields|Receives|"
    "Warns|Example|Examples|Note|Notes|Warning|Warnings|See Also|Todo|Other Parameters"
)
SECTION_LIKE = re.compile(rf"^\s*(?:{SECTION_NAMES})\b[^:\n]*:\s*$", re.M)
SECTION = re.compile(rf"^\s*(?:{SECTION_NAMES}):\s*$", re.M)


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _docstrings(path: Path) -> Iterator[tuple[str, int, str]]:
    """Every docstring in a file: where it is (qualified name, line) and its text.

    Besides modules, classes and functions, this includes attribute docstrings: a
    string statement right after an assignment, which griffe shows as the
    attribute's documentation.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"))
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)

    def visit(node: ast.AST, prefix: str) -> Iterator[tuple[str, int, str]]:
        body = getattr(node, "body", [])
        for previous, child in zip([None, *body], body, strict=False):
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}.{child.name}"
                doc = ast.get_docstring(child, clean=False)
                if doc is not None:
                    yield name, child.lineno, doc
                yield from visit(child, name)
            elif (
                isinstance(child, ast.Expr)
                and isinstance(child.value, ast.Constant)
                and isinstance(child.value.value, str)
                and isinstance(previous, ast.Assign | ast.AnnAssign)
            ):
                yield f"{prefix} (attribute)", child.lineno, child.value.value

    doc = ast.get_docstring(tree, clean=False)
    if doc is not None:
        yield module, 1, doc
    yield from visit(tree, module)


def _all_docstrings() -> list[tuple[str, int, str, str]]:
    return [
        (str(path.relative_to(PACKAGE.parent)), line, name, doc)
        for path in _modules()
        for name, line, doc in _docstrings(path)
    ]


def test_docstrings_found() -> None:
    """The walk sees the package's docstrings (a broken walk would pass every check)."""
    found = {name for _, _, name, _ in _all_docstrings()}
    assert "trio_session._session.facade.AgentSession.prompt" in found
    assert "trio_session.providers._openai.OpenAIProvider" in found
    assert len(found) > 500


def test_no_sphinx_markup() -> None:
    """No docstring holds a Sphinx role, a field list, a ``::`` block or a directive."""
    bad = [
        f"{path}:{line} {name}: {match.group().strip()!r}"
        for path, line, name, doc in _all_docstrings()
        for pattern in (SPHINX_ROLE, LITERAL_BLOCK)
        for match in pattern.finditer(doc)
    ]
    assert bad == []


def test_google_sections_are_plain() -> None:
    """A section header is its name and a colon (``Args:``), nothing between them.

    griffe takes ``Args (besides …):`` for prose, and the parameters under it for text.
    """
    bad = [
        f"{path}:{line} {name}: {match.group().strip()!r}"
        for path, line, name, doc in _all_docstrings()
        for match in SECTION_LIKE.finditer(doc)
        if not SECTION.fullmatch(match.group())
    ]
    assert bad == []


def test_examples_are_fenced() -> None:
    """An ``Example:`` section holds a fenced code block, which Markdown renders as code."""
    bad = []
    for path, line, name, doc in _all_docstrings():
        for match in re.finditer(r"^\s*Examples?:\s*$", doc, re.M):
            # The block starts on the next line: griffe ends a section at a blank line.
            if not re.match(r"\n[ \t]*```", doc[match.end() :]):
                bad.append(f"{path}:{line} {name}")
    assert bad == []


@pytest.mark.parametrize(
    ("text", "bad"),
    [
        ("See :class:`AgentSession`.", True),
        ("Call :py:meth:`x.y`.", True),
        (":param x: the x", True),
        ("Example::\n\n    x()", True),
        ("The tree::", True),
        (".. code-block:: python", True),
        ("See ``AgentSession`` (R-15): a::b is fine.", False),
        ("Example:\n    ```python\n    x()\n    ```", False),
    ],
)
def test_markup_patterns(text: str, bad: bool) -> None:
    """The patterns catch reStructuredText markup and leave Markdown alone."""
    assert bool(SPHINX_ROLE.search(text) or LITERAL_BLOCK.search(text)) is bad


# -- every public name has a docstring ------------------------------------------------


def _public(module_name: str) -> list[tuple[str, Any]]:
    module = importlib.import_module(module_name)
    return [(f"{module_name}.{name}", getattr(module, name)) for name in module.__all__]


def _defined_here(obj: Any) -> bool:
    return getattr(obj, "__module__", "").partition(".")[0] == "trio_session"


def _own_doc(obj: Any) -> str | None:
    """The docstring ``obj`` has itself (a class's is not its base class's)."""
    if inspect.isclass(obj):
        doc = vars(obj).get("__doc__")
        return doc if isinstance(doc, str) else None
    return getattr(obj, "__doc__", None)


def _attribute_docs(module: ModuleType) -> dict[str, str]:
    """Module-level names documented by a string statement right after their assignment
    (or declaration: also in a top-level ``if``, such as ``if TYPE_CHECKING:``, where a
    module declares what its ``__getattr__`` builds when first read)."""
    tree = ast.parse(inspect.getsource(module))
    docs: dict[str, str] = {}
    blocks = [tree.body, *(node.body for node in tree.body if isinstance(node, ast.If))]
    pairs = [pair for body in blocks for pair in itertools.pairwise(body)]
    for previous, node in pairs:
        if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            continue
        if not isinstance(node.value.value, str):
            continue
        targets = previous.targets if isinstance(previous, ast.Assign) else []
        if isinstance(previous, ast.AnnAssign):
            targets = [previous.target]
        for target in targets:
            if isinstance(target, ast.Name):
                docs[target.id] = node.value.value
    return docs


def _constant_doc(package: str, name: str) -> str | None:
    """The attribute docstring of a public constant or type alias, where it is defined."""
    module = importlib.import_module(package)
    table: dict[str, str] = getattr(module, "_EXPORTS", {})
    home = importlib.import_module(table[name], package) if name in table else module
    return _attribute_docs(home).get(name)


def _undocumented() -> list[str]:
    missing = []
    for module_name in PUBLIC_MODULES:
        for path, obj in _public(module_name):
            name = path.rpartition(".")[2]
            if inspect.isclass(obj) or inspect.isfunction(obj):
                if not (_own_doc(obj) or "").strip():
                    missing.append(path)
            elif not (_constant_doc(module_name, name) or "").strip():
                missing.append(f"{path} (constant)")
            if not (inspect.isclass(obj) and _defined_here(obj)):
                continue
            for member, value in vars(obj).items():
                if member.startswith("_"):
                    continue
                function = value
                if isinstance(value, staticmethod | classmethod):
                    function = value.__func__
                elif isinstance(value, property):
                    function = value.fget
                if not inspect.isfunction(function) or not _defined_here(function):
                    continue  # an attrs field, a class variable, or attrs' own code
                if not (function.__doc__ or "").strip():
                    missing.append(f"{path}.{member}")
    return sorted(set(missing))


def test_public_names_have_docstrings() -> None:
    """Every name in a public ``__all__``, and every public method and property of a
    public class, has a docstring."""
    assert _undocumented() == []


# -- every public name is in the reference --------------------------------------------


DIRECTIVE = re.compile(r"^::: *([\w.]+)[ \t]*\n((?:[ \t]+.*\n|[ \t]*\n(?=[ \t]+\S))*)", re.M)


def _resolve(path: str) -> Any:
    module_name, _, attribute = path.rpartition(".")
    try:
        return importlib.import_module(path)
    except ImportError:
        return getattr(importlib.import_module(module_name), attribute)


def _documented() -> tuple[set[str], list[Any]]:
    """The paths the reference pages render, and the objects they are."""
    paths: set[str] = set()
    for page in sorted(REFERENCE.glob("*.md")):
        for match in DIRECTIVE.finditer(page.read_text(encoding="utf-8")):
            path, options = match.group(1), match.group(2)
            paths.add(path)
            target = _resolve(path)
            if inspect.ismodule(target):  # a module renders its public members
                members = re.search(r"members:\s*\n((?:\s+- .*\n)+)", options)
                names = (
                    re.findall(r"- (\w+)", members.group(1))
                    if members
                    else list(getattr(target, "__all__", []))
                )
                paths.update(f"{path}.{name}" for name in names)
    return paths, [_resolve(path) for path in paths]


def test_reference_pages_exist() -> None:
    """The reference is where the check looks for it."""
    pages = sorted(p.name for p in REFERENCE.glob("*.md"))
    assert "index.md" in pages
    assert len(pages) > 5


def test_every_public_name_is_in_the_reference() -> None:
    """Each public name is rendered on a reference page, by its own path or as the same
    object under another public path (``trio_session.RpcClient`` is
    ``trio_session.rpc.RpcClient``); no private module is rendered."""
    paths, objects = _documented()
    missing = []
    for module_name in PUBLIC_MODULES:
        for path, obj in _public(module_name):
            if path in paths:
                continue
            named = inspect.isclass(obj) or inspect.isfunction(obj)
            if named and any(obj is other for other in objects):
                continue
            missing.append(path)
    assert missing == []
    private = sorted(p for p in paths if any(part.startswith("_") for part in p.split(".")))
    assert private == []


# -- every parameter is described -----------------------------------------------------

#: A Google ``Args:`` or ``Attributes:`` section: its header, then its indented block.
PARAMETER_SECTION = re.compile(
    r"^([ \t]*)(?:Args|Attributes):[ \t]*\n((?:\1[ \t]+\S.*\n|[ \t]*\n(?=\1[ \t]+\S))*)", re.M
)
#: One entry of such a section: ``name:`` or ``name (type):``, at the block's indent.
PARAMETER_ENTRY = re.compile(r"\**(\w+)(?:[ \t]*\([^)\n]*\))?:")


def _described(doc: str | None) -> set[str]:
    """The names the ``Args:`` and ``Attributes:`` sections of ``doc`` describe."""
    names: set[str] = set()
    for match in PARAMETER_SECTION.finditer(inspect.cleandoc(doc or "") + "\n"):
        lines = [line for line in match.group(2).splitlines() if line.strip()]
        indent = min(len(line) - len(line.lstrip()) for line in lines)
        for line in lines:
            if len(line) - len(line.lstrip()) == indent:
                entry = PARAMETER_ENTRY.match(line.lstrip())
                if entry:
                    names.add(entry.group(1))
    return names


def _parameters(function: Any) -> list[str]:
    """The named parameters of ``function``: not ``self``/``cls``, ``*args``, ``**kwargs``."""
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    return [
        p.name
        for p in inspect.signature(function).parameters.values()
        if p.name not in ("self", "cls") and p.kind not in variadic
    ]


def _constructor(cls: type) -> tuple[list[str], set[str]]:
    """A class's constructor parameters, and the names its docstrings describe.

    An attrs class's parameters are its fields' public aliases (``api_key`` for
    ``_api_key``), as ``docs/griffe_attrs.py`` renders them; that extension copies a
    base class's ``Args:`` entries into a subclass's table, so base classes count.
    Another class's ``__init__`` docstring is merged into the class's
    (``merge_init_into_class``). Field docstrings do not count: the reference shows
    them as separate attributes, not in the parameter table.
    """
    if attrs.has(cls):
        names = [field.alias for field in attrs.fields(cls) if field.init]
        bases = [base for base in cls.__mro__ if _defined_here(base)]
        return names, set().union(*(_described(_own_doc(base)) for base in bases))
    if "__init__" not in vars(cls):
        return [], set()
    init = vars(cls)["__init__"]
    return _parameters(init), _described(_own_doc(cls)) | _described(init.__doc__)


def _callables() -> Iterator[tuple[str, list[str], set[str]]]:
    """Each public function, method and constructor: its path, parameters, described names."""
    seen: set[int] = set()
    for module_name in PUBLIC_MODULES:
        for path, obj in _public(module_name):
            if id(obj) in seen or not _defined_here(obj):
                continue
            seen.add(id(obj))
            if inspect.isfunction(obj):
                yield path, _parameters(obj), _described(obj.__doc__)
            if not inspect.isclass(obj):
                continue
            yield path, *_constructor(obj)
            for member, value in vars(obj).items():
                function = value
                if isinstance(value, staticmethod | classmethod):
                    function = value.__func__
                if member.startswith("_") or not inspect.isfunction(function):
                    continue  # properties take no parameters
                if _defined_here(function):
                    yield f"{path}.{member}", _parameters(function), _described(function.__doc__)


def _undescribed() -> dict[str, list[str]]:
    missing: dict[str, list[str]] = {}
    for path, parameters, described in _callables():
        absent = [name for name in parameters if name not in described]
        if absent:
            missing[path] = absent
    return missing


@pytest.mark.parametrize(
    ("doc", "names"),
    [
        (
            "Do it.\n\nArgs:\n    path: where.\n    clock (Callable): when;\n        long.\n",
            {"path", "clock"},
        ),
        (
            "X.\n\n    Attributes:\n        type: the wire name.\n\n    Returns:\n        y: no.\n",
            {"type"},
        ),
        ("Nothing described: path: here.", set()),
        ("X.\n\nArgs:\n    a: one.\n\n    b: after a blank line.\nNot: this.\n", {"a", "b"}),
    ],
)
def test_described_parses_google_sections(doc: str, names: set[str]) -> None:
    """The section parser finds the entries of ``Args:``/``Attributes:`` and only those."""
    assert _described(doc) == names


def test_audit_sees_the_api() -> None:
    """The walk covers functions, methods, classmethods and attrs constructors."""
    found = {path: parameters for path, parameters, _ in _callables()}
    assert found["trio_session.open_history"][:2] == ["path", "directory"]
    assert "type" in found["trio_session.AutoRetryStart"]
    assert "api_key" in found["trio_session.OpenAIProvider"]  # ``_api_key``'s alias
    assert "path" in found["trio_session.SessionFile.resume"]  # a classmethod
    assert len(found) > 300


def test_every_parameter_is_described() -> None:
    """Every parameter of a public function, method or constructor has an entry in its
    docstring's ``Args:`` (or, for a class, ``Attributes:``) section, so the reference's
    parameter table lists it. A literal discriminator (``type``, ``role``) counts too:
    it is a constructor parameter like any other."""
    assert _undescribed() == {}
