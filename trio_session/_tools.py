"""Tools from plain Python functions: a JSON schema from type hints, checked arguments.

``tool`` (a decorator) and ``Tool.from_function`` turn a function into a ``Tool``:

* the **schema** of its arguments comes from the type hints — ``str``, ``int``,
  ``float``, ``bool``, ``None``, unions (``X | None``), ``Literal``, ``Enum``
  subclasses, ``list`` / ``tuple`` / ``set`` / ``dict[str, X]``, ``Any``, and
  nested ``TypedDict``, dataclass and attrs classes; ``Annotated[X, "text"]``
  describes a value;
* the **descriptions** come from the Google-style docstring: its summary paragraph
  describes the tool, its ``Args:`` entries describe the parameters;
* the **arguments** the model sends are checked against that schema before the
  function runs; every problem is named in one ``ToolArgumentError``, which the
  model gets back as the error result of its call, so it can try again.

The function may be sync or async. A sync function runs inline, in the agent's
task: a tool that blocks (disk, network, CPU) should be ``async`` or hand its
work to ``trio.to_thread.run_sync`` itself. Its return value is the result text:
a ``str`` as it is, ``None`` as ``""``, anything else as JSON.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import math
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, overload

import attrs

from ._errors import TrioSessionError
from ._json import MAX_JSON_DEPTH, TOO_DEEP, json_depth

if TYPE_CHECKING:
    from ._agent import Tool

__all__ = ["ToolArgumentError", "function_tool", "tool"]

#: The tool names the model APIs accept.
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
#: At most this many problems are spelled out in an error message.
_SHOWN_PROBLEMS = 10


class ToolArgumentError(TrioSessionError, ValueError):
    """The arguments of a tool call do not match the tool's schema.

    The message names every problem, for the model to read and retry, e.g.
    ``invalid arguments for tool "get_weather": "unit" must be one of "c", "f", not "k"``.

    Attributes:
        tool: the tool's name.
        problems: each problem, as a sentence fragment.
    """

    tool: str
    problems: tuple[str, ...]

    def __init__(self, tool: str, problems: Sequence[str]) -> None:
        shown = list(problems[:_SHOWN_PROBLEMS])
        if len(problems) > _SHOWN_PROBLEMS:
            shown.append(f"and {len(problems) - _SHOWN_PROBLEMS} more problems")
        super().__init__(f'invalid arguments for tool "{tool}": ' + "; ".join(shown))
        self.tool = tool
        self.problems = tuple(problems)


# --- values as the model sees them ------------------------------------------------------

_BAD: Any = object()  # what a check returns for a value it rejected
_NO_DEFAULT: Any = object()
_MISSING = inspect.Parameter.empty


def _kind(value: object) -> str:
    """The JSON type of a decoded value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return type(value).__name__


def _show(value: object) -> str:
    """A value as JSON, cut short when long."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _json_value(value: object) -> Any:
    """``value`` as JSON data, or ``_NO_DEFAULT`` if it has no JSON form."""
    if isinstance(value, enum.Enum):
        return _json_value(value.value)
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else _NO_DEFAULT
    if isinstance(value, (list, tuple)):
        items = [_json_value(v) for v in value]
        return _NO_DEFAULT if any(i is _NO_DEFAULT for i in items) else items
    if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
        data = {k: _json_value(v) for k, v in value.items()}
        return _NO_DEFAULT if any(v is _NO_DEFAULT for v in data.values()) else data
    return _NO_DEFAULT


def _encode_result(value: object) -> str:
    """A tool's return value as the result text."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


# --- schema nodes -------------------------------------------------------------------------

Check = Callable[[Any, str, list[str]], Any]


@attrs.frozen
class _Node:
    """One type: its JSON schema and the check (and conversion) of a value of it.

    ``check(value, path, problems)`` returns the value converted for the function
    (an ``Enum`` member, a tuple, a dataclass instance, ``3.0`` for ``3``) or
    ``_BAD`` after adding what is wrong to ``problems``.
    """

    schema: dict[str, Any]
    check: Check
    expects: str  # "an integer", for messages
    kinds: frozenset[str]  # the JSON types it may accept; "any" for all
    hashable: bool = True  # its converted values can go in a set


class _Unsupported(Exception):
    """A type with no JSON schema (the reason names it)."""


def _type_name(tp: object) -> str:
    if isinstance(tp, type) and not typing.get_args(tp):
        return tp.__qualname__
    return repr(tp).replace("typing.", "")


def _at(path: str) -> str:
    return f'"{path}"'


def _scalar(json_type: str, expects: str, accept: Callable[[object], bool]) -> _Node:
    def check(value: Any, path: str, problems: list[str]) -> Any:
        if accept(value):
            return value
        problems.append(f"{_at(path)} must be {expects}, not {_show(value)}")
        return _BAD

    return _Node({"type": json_type}, check, expects, frozenset({json_type}))


def _number() -> _Node:
    def check(value: Any, path: str, problems: list[str]) -> Any:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)  # the one conversion: a whole number for a float
        problems.append(f"{_at(path)} must be a number, not {_show(value)}")
        return _BAD

    return _Node({"type": "number"}, check, "a number", frozenset({"number", "integer"}))


_STRING = _scalar("string", "a string", lambda v: isinstance(v, str))
_INTEGER = _scalar(
    "integer", "an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)
)
_BOOLEAN = _scalar("boolean", "a boolean", lambda v: isinstance(v, bool))
_NULL = _scalar("null", "null", lambda v: v is None)
_ANY = _Node({}, lambda value, path, problems: value, "any value", frozenset({"any"}), False)


def _choice(values: Sequence[object], members: Sequence[object]) -> _Node:
    """``Literal`` values or ``Enum`` members (``values`` are their JSON forms)."""
    for value in values:
        if not (value is None or isinstance(value, (str, int, float))):
            raise _Unsupported(f"the value {value!r} has no JSON form")
    shown = ", ".join(_show(v) for v in values)
    expects = f"one of {shown}" if len(values) > 1 else shown
    kinds = frozenset(_kind(v) for v in values)
    schema: dict[str, Any] = {"type": next(iter(kinds))} if len(kinds) == 1 else {}
    schema["enum"] = list(values)

    def check(value: Any, path: str, problems: list[str]) -> Any:
        for known, member in zip(values, members, strict=True):
            if type(value) is type(known) and value == known:  # True is not 1
                return member
        problems.append(f"{_at(path)} must be {expects}, not {_show(value)}")
        return _BAD

    if "number" in kinds:
        kinds |= {"integer"}
    return _Node(schema, check, expects, kinds)


def _union(branches: Sequence[_Node]) -> _Node:
    expects = " or ".join(b.expects for b in branches)
    kinds = frozenset().union(*(b.kinds for b in branches))

    def check(value: Any, path: str, problems: list[str]) -> Any:
        fits = []
        for branch in branches:
            found: list[str] = []
            converted = branch.check(value, path, found)
            if not found:
                return converted
            if "any" in branch.kinds or _kind(value) in branch.kinds:
                fits.append(found)
        if len(fits) == 1:  # one branch takes this kind of value: say what is wrong inside
            problems.extend(fits[0])
        else:
            problems.append(f"{_at(path)} must be {expects}, not {_show(value)}")
        return _BAD

    schema = {"anyOf": [b.schema for b in branches]}
    return _Node(schema, check, expects, kinds, all(b.hashable for b in branches))


def _array(items: _Node | None, *, make: Callable[[list[Any]], Any], unique: bool = False) -> _Node:
    schema: dict[str, Any] = {"type": "array"}
    if items is not None:
        schema["items"] = items.schema
    if unique:
        schema["uniqueItems"] = True

    def check(value: Any, path: str, problems: list[str]) -> Any:
        if not isinstance(value, (list, tuple)):
            problems.append(f"{_at(path)} must be an array, not {_show(value)}")
            return _BAD
        if items is None:
            return make(list(value))
        before = len(problems)
        out = [items.check(v, f"{path}[{i}]", problems) for i, v in enumerate(value)]
        if len(problems) > before:
            return _BAD
        if unique and len(set(out)) < len(out):
            problems.append(f"{_at(path)} must not repeat an item, not {_show(value)}")
            return _BAD
        return make(out)

    hashable = make is tuple and (items is None or items.hashable)
    return _Node(schema, check, "an array", frozenset({"array"}), hashable)


def _fixed_tuple(items: Sequence[_Node]) -> _Node:
    n = len(items)
    schema = {
        "type": "array",
        "prefixItems": [i.schema for i in items],
        "minItems": n,
        "maxItems": n,
    }
    expects = f"an array of {n} items"

    def check(value: Any, path: str, problems: list[str]) -> Any:
        if not isinstance(value, (list, tuple)) or len(value) != n:
            problems.append(f"{_at(path)} must be {expects}, not {_show(value)}")
            return _BAD
        before = len(problems)
        pairs = enumerate(zip(items, value, strict=True))
        out = tuple(node.check(v, f"{path}[{i}]", problems) for i, (node, v) in pairs)
        return _BAD if len(problems) > before else out

    return _Node(schema, check, expects, frozenset({"array"}), all(i.hashable for i in items))


def _mapping(values: _Node | None) -> _Node:
    schema: dict[str, Any] = {"type": "object"}
    if values is not None:
        schema["additionalProperties"] = values.schema

    def check(value: Any, path: str, problems: list[str]) -> Any:
        if not isinstance(value, Mapping):
            problems.append(f"{_at(path)} must be an object, not {_show(value)}")
            return _BAD
        if values is None:
            return dict(value)
        before = len(problems)
        out = {k: values.check(v, f"{path}.{k}", problems) for k, v in value.items()}
        return _BAD if len(problems) > before else out

    return _Node(schema, check, "an object", frozenset({"object"}), False)


@attrs.frozen
class _Field:
    """A parameter of the function, or a field of a nested object type."""

    name: str
    node: _Node
    required: bool
    default: Any = _NO_DEFAULT  # the JSON form of the default, if it has one
    description: str = ""

    def schema(self) -> dict[str, Any]:
        schema = dict(self.node.schema)
        if self.description and "description" not in schema:  # Annotated text comes first
            schema["description"] = self.description
        if not self.required and self.default is not _NO_DEFAULT:
            schema["default"] = self.default
        return schema


def _object(fields: Sequence[_Field], make: Callable[[dict[str, Any]], Any]) -> _Node:
    """An object with known keys; ``path == ""`` is the whole argument list."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {f.name: f.schema() for f in fields},
    }
    required = [f.name for f in fields if f.required]
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    names = {f.name for f in fields}

    def check(value: Any, path: str, problems: list[str]) -> Any:
        if not isinstance(value, Mapping):
            what = "the arguments" if not path else _at(path)
            problems.append(f"{what} must be an object, not {_show(value)}")
            return _BAD
        before = len(problems)
        out: dict[str, Any] = {}
        for f in fields:
            where = f"{path}.{f.name}" if path else f.name
            if f.name in value:
                out[f.name] = f.node.check(value[f.name], where, problems)
            elif f.required:
                problems.append(f"{_at(where)} is required")
        for key in value:
            if key not in names:
                inside = f" in {_at(path)}" if path else ""
                problems.append(f"unknown {'key' if path else 'argument'} {_show(key)}{inside}")
        if len(problems) > before:
            return _BAD
        try:
            return make(out)
        except Exception as exc:  # a nested class's own validation
            problems.append(f"{_at(path)} is not valid: {exc}")
            return _BAD

    return _Node(schema, check, "an object", frozenset({"object"}), False)


# --- from type hints to nodes ----------------------------------------------------------------

_WRAPPERS = (
    {typing.Required, typing.NotRequired, typing.ReadOnly}
    if hasattr(typing, "ReadOnly")
    else {typing.Required, typing.NotRequired}
)


def _hints(owner: object) -> dict[str, Any]:
    try:
        return typing.get_type_hints(owner, include_extras=True)
    except Exception as exc:  # a NameError for a hint that does not resolve, mostly
        raise _Unsupported(f"its type hints cannot be resolved ({exc})") from exc


def _node(tp: Any, seen: tuple[type, ...]) -> _Node:
    """The node for a type hint; ``_Unsupported`` if it has no JSON schema."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        inner = _node(args[0], seen)
        text = next((m for m in args[1:] if isinstance(m, str)), None)
        if text is None:
            return inner
        return attrs.evolve(inner, schema={**inner.schema, "description": text})
    if tp is str:
        return _STRING
    if tp is bool:
        return _BOOLEAN
    if tp is int:
        return _INTEGER
    if tp is float:
        return _number()
    if tp is None or tp is types.NoneType:
        return _NULL
    if tp is Any:
        return _ANY
    if origin is typing.Literal:
        values = [_json_value(a) if isinstance(a, enum.Enum) else a for a in args]
        return _choice(values, args)
    if origin in (types.UnionType, typing.Union):
        return _union([_node(a, seen) for a in args])
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        members = list(tp)
        if not members:
            raise _Unsupported(f"the enum {tp.__qualname__} has no members")
        return _choice([m.value for m in members], members)
    if tp in (list, Sequence) or origin in (list, Sequence):
        return _array(_node(args[0], seen) if args else None, make=list)
    if tp is tuple or origin is tuple:
        if not args:
            return _array(None, make=tuple)
        if len(args) == 2 and args[1] is Ellipsis:
            return _array(_node(args[0], seen), make=tuple)
        if args == ((),):
            return _fixed_tuple([])
        return _fixed_tuple([_node(a, seen) for a in args])
    if tp in (set, frozenset) or origin in (set, frozenset):
        items = _node(args[0], seen) if args else _ANY
        if not items.hashable:
            msg = (
                f"the items of {_type_name(tp)} cannot be put in a set"
                " (use str, int, float, bool, Literal, Enum, or tuples of them)"
            )
            raise _Unsupported(msg)
        make = frozenset if (origin or tp) is frozenset else set
        return _array(items, make=make, unique=True)
    if tp in (dict, Mapping) or origin in (dict, Mapping):
        if not args:
            return _mapping(None)
        if args[0] is not str:
            raise _Unsupported(f"the keys of {_type_name(tp)} are not str (JSON keys are)")
        return _mapping(_node(args[1], seen))
    if isinstance(tp, type) and (
        typing.is_typeddict(tp) or dataclasses.is_dataclass(tp) or attrs.has(tp)
    ):
        if tp in seen:
            raise _Unsupported(f"{tp.__qualname__} contains itself")
        return _class_node(tp, (*seen, tp))
    raise _Unsupported(f"{_type_name(tp)} has no JSON schema")


def _class_node(cls: type, seen: tuple[type, ...]) -> _Node:
    """A ``TypedDict``, dataclass or attrs class as an object."""
    hints = _hints(cls)
    described = parse_docstring(cls.__dict__.get("__doc__") or "")[1]
    fields: list[_Field] = []

    def add(name: str, hint: Any, required: bool, default: Any, *aliases: str) -> None:
        text = next((described[n] for n in (name, *aliases) if n in described), "")
        fields.append(_Field(name, _node(_unwrap(hint), seen), required, default, text))

    if typing.is_typeddict(cls):
        required_keys: frozenset[str] = getattr(cls, "__required_keys__", frozenset())
        for name, hint in hints.items():
            # Under ``from __future__ import annotations`` Python 3.11 cannot see
            # ``NotRequired`` when it builds ``__required_keys__``: the hint says it.
            marked = typing.get_origin(hint)
            required = name in required_keys
            if marked is typing.Required or marked is typing.NotRequired:
                required = marked is typing.Required
            add(name, hint, required, _NO_DEFAULT)
        return _object(fields, dict)
    if dataclasses.is_dataclass(cls):
        for f in dataclasses.fields(cls):
            if f.init:
                required = f.default is dataclasses.MISSING and (
                    f.default_factory is dataclasses.MISSING
                )
                default = _NO_DEFAULT if required else _json_value(f.default)
                add(f.name, hints.get(f.name, f.type), required, default)
        return _object(fields, lambda kwargs: cls(**kwargs))
    for a in attrs.fields(cls):
        if a.init:
            required = a.default is attrs.NOTHING
            plain = not (required or isinstance(a.default, attrs.Factory))  # type: ignore[arg-type]
            default = _json_value(a.default) if plain else _NO_DEFAULT
            hint = hints.get(a.name, a.type)
            if hint is None:
                raise _Unsupported(f"the field {a.name!r} of {cls.__qualname__} has no type")
            add(a.alias or a.name, hint, required, default, a.name)
    return _object(fields, lambda kwargs: cls(**kwargs))


def _unwrap(hint: Any) -> Any:
    while typing.get_origin(hint) in _WRAPPERS:
        hint = typing.get_args(hint)[0]
    return hint


# --- docstrings ---------------------------------------------------------------------------

_SECTION = re.compile(r"^(?P<name>[A-Z][A-Za-z ]*):\s*$")
_ARG_SECTIONS = {
    "Args",
    "Arguments",
    "Parameters",
    "Params",
    "Keyword Args",
    "Keyword Arguments",
    "Other Parameters",
    "Attributes",
}
_ENTRY = re.compile(r"^\*{0,2}(?P<name>\w+)\s*(?:\([^)]*\))?\s*:(?:\s+(?P<text>.*))?$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The summary paragraph of a Google-style docstring, and its argument descriptions.

    Entries of ``Args:`` (also ``Arguments:``, ``Parameters:``, ``Keyword Args:``,
    ``Attributes:`` …) are ``name: text`` or ``name (type): text``; more-indented
    lines continue an entry and are joined to it with spaces.
    """
    lines = inspect.cleandoc(doc).splitlines()
    start = 0
    while start < len(lines) and lines[start].strip() and not _SECTION.match(lines[start]):
        start += 1
    summary = [line.strip() for line in lines[:start]]
    entries: dict[str, list[str]] = {}
    section: str | None = None
    current: str | None = None
    entry_indent: int | None = None
    for line in lines[start:]:
        text = line.strip()
        if not text:
            continue
        indent = len(line) - len(line.lstrip())
        if indent == 0:
            match = _SECTION.match(line)
            section = match["name"] if match else None
            current, entry_indent = None, None
            continue
        if section not in _ARG_SECTIONS:
            continue
        if entry_indent is None:
            entry_indent = indent
        if indent <= entry_indent:
            match = _ENTRY.match(text)
            current = str(match["name"]) if match else None
            if current is not None and match:
                entries[current] = [match["text"] or ""]
            continue
        if current is not None:
            entries[current].append(text)
    descriptions = {name: " ".join(p for p in parts if p) for name, parts in entries.items()}
    return " ".join(summary), descriptions


# --- functions as tools ---------------------------------------------------------------------


@attrs.frozen
class _FunctionCall:
    """A tool's ``execute``: checks the arguments, then calls the function.

    Attributes:
        function: the function the tool was made from.
    """

    function: Callable[..., Any]
    _tool: str
    _arguments: _Node
    _positional: tuple[tuple[str, Any], ...]  # positional-only parameters and defaults

    async def __call__(self, arguments: Mapping[str, Any]) -> str:
        if json_depth(arguments) > MAX_JSON_DEPTH:  # a model's never are (see _agent)
            raise ToolArgumentError(self._tool, [f"the arguments are {TOO_DEEP}"])
        problems: list[str] = []
        kwargs = self._arguments.check(arguments, "", problems)
        if problems:
            raise ToolArgumentError(self._tool, problems)
        args = [kwargs.pop(name, default) for name, default in self._positional]
        result = self.function(*args, **kwargs)
        if inspect.isawaitable(result):
            result = await result
        return _encode_result(result)


def function_tool(
    cls: type[Tool],
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
) -> Tool:
    """The body of ``Tool.from_function`` (see there)."""
    if not callable(fn):
        msg = f"a tool is made from a function, not {fn!r}."
        raise TypeError(msg)
    name = name if name is not None else getattr(fn, "__name__", "")
    if not _NAME.match(name):
        msg = (
            f"the tool name {name!r} is not valid: use 1 to 64 letters, digits, _ or -"
            " (pass name= to choose one)."
        )
        raise ValueError(msg)
    what = f'the function {getattr(fn, "__qualname__", name)} (tool "{name}")'
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        msg = f"{what} has no signature to read its parameters from: {exc}."
        raise TypeError(msg) from exc
    try:
        hints = _hints(fn)
    except _Unsupported as exc:
        msg = f"{what} cannot be a tool: {exc}."
        raise TypeError(msg) from exc
    summary, described = parse_docstring(inspect.getdoc(fn) or "")
    fields: list[_Field] = []
    positional: list[tuple[str, Any]] = []
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            star = "*" if param.kind is param.VAR_POSITIONAL else "**"
            msg = (
                f"{what} takes {star}{param.name}, which a tool cannot describe:"
                " name each parameter the model may pass."
            )
            raise TypeError(msg)
        if param.name not in hints:
            msg = (
                f'the parameter "{param.name}" of {what} has no type hint;'
                " annotate it, since the model needs its JSON schema."
            )
            raise TypeError(msg)
        hint = hints[param.name]
        try:
            node = _node(hint, ())
        except _Unsupported as exc:
            msg = (
                f'the parameter "{param.name}" of {what} has the type {_type_name(hint)},'
                f" which a tool cannot take: {exc}."
            )
            raise TypeError(msg) from exc
        required = param.default is _MISSING
        default = _NO_DEFAULT if required else _json_value(param.default)
        fields.append(_Field(param.name, node, required, default, described.get(param.name, "")))
        if param.kind is param.POSITIONAL_ONLY:
            positional.append((param.name, param.default))
    arguments = _object(fields, dict)
    execute = _FunctionCall(fn, name, arguments, tuple(positional))
    return cls(
        name=name,
        execute=execute,
        description=summary if description is None else description,
        parameters=arguments.schema,
    )


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *, name: str | None = None, description: str | None = None
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a ``Tool`` of a function: ``@tool`` or ``@tool(name=..., description=...)``.

    The decorated name is then the ``Tool`` (the function stays reachable as
    ``its_tool.execute.function``). See ``Tool.from_function`` for what is read
    from the function.

    Args:
        fn: the function (when used bare, as ``@tool``).
        name: the tool's name; the function's ``__name__`` if not given.
        description: what the tool does; the docstring's summary if not given.
    """
    from ._agent import Tool  # _agent's Tool.from_function imports this module

    if fn is not None:
        return Tool.from_function(fn, name=name, description=description)

    def decorate(fn: Callable[..., Any]) -> Tool:
        return Tool.from_function(fn, name=name, description=description)

    return decorate
