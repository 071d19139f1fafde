"""A tool's arguments as a JSON schema, read from a function's type hints and docstring.

``node_of`` turns a type hint into a ``Node``: the JSON schema of the type and the
check (and conversion) of a value the model sends for it; ``parse_docstring`` reads
the summary and the ``Args:`` entries of a Google-style docstring. ``._tools`` builds
a ``Tool`` of a function with them.
"""

from __future__ import annotations

import enum
import inspect
import json
import math
import re
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from .._core.classes import frozen

# --- values as the model sees them ------------------------------------------------------

_BAD: Any = object()  # what a check returns for a value it rejected
NO_DEFAULT: Any = object()
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


def json_value(value: object) -> Any:
    """``value`` as JSON data, or ``NO_DEFAULT`` if it has no JSON form."""
    if isinstance(value, enum.Enum):
        return json_value(value.value)
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else NO_DEFAULT
    if isinstance(value, (list, tuple)):
        items = [json_value(v) for v in value]
        return NO_DEFAULT if any(i is NO_DEFAULT for i in items) else items
    if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
        data = {k: json_value(v) for k, v in value.items()}
        return NO_DEFAULT if any(v is NO_DEFAULT for v in data.values()) else data
    return NO_DEFAULT


# --- schema nodes -------------------------------------------------------------------------

Check = Callable[[Any, str, list[str]], Any]


@frozen
class Node:
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


class Unsupported(Exception):
    """A type with no JSON schema (the reason names it)."""


def type_name(tp: object) -> str:
    if isinstance(tp, type) and not typing.get_args(tp):
        return tp.__qualname__
    return repr(tp).replace("typing.", "")


def _at(path: str) -> str:
    return f'"{path}"'


def _scalar(json_type: str, expects: str, accept: Callable[[object], bool]) -> Node:
    def check(value: Any, path: str, problems: list[str]) -> Any:
        if accept(value):
            return value
        problems.append(f"{_at(path)} must be {expects}, not {_show(value)}")
        return _BAD

    return Node({"type": json_type}, check, expects, frozenset({json_type}))


def _number() -> Node:
    def check(value: Any, path: str, problems: list[str]) -> Any:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)  # the one conversion: a whole number for a float
        problems.append(f"{_at(path)} must be a number, not {_show(value)}")
        return _BAD

    return Node({"type": "number"}, check, "a number", frozenset({"number", "integer"}))


_STRING = _scalar("string", "a string", lambda v: isinstance(v, str))
_INTEGER = _scalar(
    "integer", "an integer", lambda v: isinstance(v, int) and not isinstance(v, bool)
)
_BOOLEAN = _scalar("boolean", "a boolean", lambda v: isinstance(v, bool))
_NULL = _scalar("null", "null", lambda v: v is None)
_ANY = Node({}, lambda value, path, problems: value, "any value", frozenset({"any"}), False)


def _choice(values: Sequence[object], members: Sequence[object]) -> Node:
    """``Literal`` values or ``Enum`` members (``values`` are their JSON forms)."""
    for value in values:
        if not (value is None or isinstance(value, (str, int, float))):
            raise Unsupported(f"the value {value!r} has no JSON form")
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
    return Node(schema, check, expects, kinds)


def _union(branches: Sequence[Node]) -> Node:
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
    return Node(schema, check, expects, kinds, all(b.hashable for b in branches))


def _array(items: Node | None, *, make: Callable[[list[Any]], Any], unique: bool = False) -> Node:
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
    return Node(schema, check, "an array", frozenset({"array"}), hashable)


def _fixed_tuple(items: Sequence[Node]) -> Node:
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

    return Node(schema, check, expects, frozenset({"array"}), all(i.hashable for i in items))


def _mapping(values: Node | None) -> Node:
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

    return Node(schema, check, "an object", frozenset({"object"}), False)


@frozen
class Field:
    """A parameter of the function, or a field of a nested object type."""

    name: str
    node: Node
    required: bool
    default: Any = NO_DEFAULT  # the JSON form of the default, if it has one
    description: str = ""

    def schema(self) -> dict[str, Any]:
        schema = dict(self.node.schema)
        if self.description and "description" not in schema:  # Annotated text comes first
            schema["description"] = self.description
        if not self.required and self.default is not NO_DEFAULT:
            schema["default"] = self.default
        return schema


def object_node(fields: Sequence[Field], make: Callable[[dict[str, Any]], Any]) -> Node:
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

    return Node(schema, check, "an object", frozenset({"object"}), False)


# --- from type hints to nodes ----------------------------------------------------------------

_WRAPPERS = (
    {typing.Required, typing.NotRequired, typing.ReadOnly}
    if hasattr(typing, "ReadOnly")
    else {typing.Required, typing.NotRequired}
)


def type_hints(owner: object) -> dict[str, Any]:
    try:
        return typing.get_type_hints(owner, include_extras=True)
    except Exception as exc:  # a NameError for a hint that does not resolve, mostly
        raise Unsupported(f"its type hints cannot be resolved ({exc})") from exc


def node_of(tp: Any, seen: tuple[type, ...]) -> Node:
    """The node for a type hint; ``Unsupported`` if it has no JSON schema."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin is typing.Annotated:
        inner = node_of(args[0], seen)
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
        values = [json_value(a) if isinstance(a, enum.Enum) else a for a in args]
        return _choice(values, args)
    if origin in (types.UnionType, typing.Union):
        return _union([node_of(a, seen) for a in args])
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        members = list(tp)
        if not members:
            raise Unsupported(f"the enum {tp.__qualname__} has no members")
        return _choice([m.value for m in members], members)
    if tp in (list, Sequence) or origin in (list, Sequence):
        return _array(node_of(args[0], seen) if args else None, make=list)
    if tp is tuple or origin is tuple:
        if not args:
            return _array(None, make=tuple)
        if len(args) == 2 and args[1] is Ellipsis:
            return _array(node_of(args[0], seen), make=tuple)
        if args == ((),):
            return _fixed_tuple([])
        return _fixed_tuple([node_of(a, seen) for a in args])
    if tp in (set, frozenset) or origin in (set, frozenset):
        items = node_of(args[0], seen) if args else _ANY
        if not items.hashable:
            msg = (
                f"the items of {type_name(tp)} cannot be put in a set"
                " (use str, int, float, bool, Literal, Enum, or tuples of them)"
            )
            raise Unsupported(msg)
        make = frozenset if (origin or tp) is frozenset else set
        return _array(items, make=make, unique=True)
    if tp in (dict, Mapping) or origin in (dict, Mapping):
        if not args:
            return _mapping(None)
        if args[0] is not str:
            raise Unsupported(f"the keys of {type_name(tp)} are not str (JSON keys are)")
        return _mapping(node_of(args[1], seen))
    if isinstance(tp, type) and (typing.is_typeddict(tp) or _is_dataclass(tp) or attrs.has(tp)):
        if tp in seen:
            raise Unsupported(f"{tp.__qualname__} contains itself")
        return _class_node(tp, (*seen, tp))
    raise Unsupported(f"{type_name(tp)} has no JSON schema")


def _is_dataclass(tp: type) -> bool:
    """``dataclasses.is_dataclass``, without importing ``dataclasses`` where nothing has:
    no class is a dataclass before that module is imported (a session program that
    defines no dataclass does not pay for it)."""
    module = sys.modules.get("dataclasses")
    return module is not None and bool(module.is_dataclass(tp))


def _class_node(cls: type, seen: tuple[type, ...]) -> Node:
    """A ``TypedDict``, dataclass or attrs class as an object."""
    hints = type_hints(cls)
    described = parse_docstring(cls.__dict__.get("__doc__") or "")[1]
    fields: list[Field] = []

    def add(name: str, hint: Any, required: bool, default: Any, *aliases: str) -> None:
        text = next((described[n] for n in (name, *aliases) if n in described), "")
        fields.append(Field(name, node_of(_unwrap(hint), seen), required, default, text))

    if typing.is_typeddict(cls):
        required_keys: frozenset[str] = getattr(cls, "__required_keys__", frozenset())
        for name, hint in hints.items():
            # Under ``from __future__ import annotations`` Python 3.11 cannot see
            # ``NotRequired`` when it builds ``__required_keys__``: the hint says it.
            marked = typing.get_origin(hint)
            required = name in required_keys
            if marked is typing.Required or marked is typing.NotRequired:
                required = marked is typing.Required
            add(name, hint, required, NO_DEFAULT)
        return object_node(fields, dict)
    if _is_dataclass(cls):
        import dataclasses  # imported already: ``cls`` is one

        for f in dataclasses.fields(cls):
            if f.init:
                required = f.default is dataclasses.MISSING and (
                    f.default_factory is dataclasses.MISSING
                )
                default = NO_DEFAULT if required else json_value(f.default)
                add(f.name, hints.get(f.name, f.type), required, default)
        return object_node(fields, lambda kwargs: cls(**kwargs))
    for a in attrs.fields(cls):
        if a.init:
            required = a.default is attrs.NOTHING
            plain = not (required or isinstance(a.default, attrs.Factory))  # type: ignore[arg-type]
            default = json_value(a.default) if plain else NO_DEFAULT
            hint = hints.get(a.name, a.type)
            if hint is None:
                raise Unsupported(f"the field {a.name!r} of {cls.__qualname__} has no type")
            add(a.alias or a.name, hint, required, default, a.name)
    return object_node(fields, lambda kwargs: cls(**kwargs))


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
