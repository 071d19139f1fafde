"""How this package makes its classes: attrs' ``frozen`` and ``define``, with one
``__repr__``, one ``__eq__`` and one ``__hash__`` shared by every class instead of one
written for each.

attrs writes the source of a ``__repr__``, an ``__eq__`` and (for a frozen class) a
``__hash__`` for every class it makes, and compiles them with the class's ``__init__``:
together some 0.2 ms a class, two thirds of the making. The package makes over 200
classes, about 170 of them before ``trio-session rpc`` answers its first command, and
about 100 for ``from trio_session import open_session`` (``rpc.spawn``,
``import.session``, docs/benchmarks.md). ``__init__`` stays attrs' own: it runs for every
value made.

The shared methods do what attrs' own would:

- ``__repr__`` prints ``Name(field=value, …)``, only the fields their ``repr`` option
  leaves in (a callable ``repr`` formats its field), and ``...`` for an instance already
  being printed further up the same repr;
- ``__eq__`` is ``NotImplemented`` for another class, else ``a == a' and b == b' …`` over
  the fields their ``eq`` option leaves in (a callable ``eq`` compares keys), returning
  what that chain returns;
- ``__hash__`` (frozen classes) hashes a per-class number and those fields' values (or
  keys); a ``define`` class that compares by value is unhashable, as attrs makes it.

A class that writes its own method, or passes the option for it (``repr=``; ``eq=``,
``order=``, ``hash=``, ``unsafe_hash=``, ``cache_hash=`` for the other two), is left to
attrs for it.

Type checkers are shown attrs' decorators themselves (the ``TYPE_CHECKING`` branch), so
mypy's attrs plugin types every class exactly as before.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from attrs import define as define
    from attrs import frozen as frozen
else:

    def frozen(maybe_cls: type | None = None, /, **options: Any) -> Any:
        """``attrs.frozen``, sharing ``__repr__`` (see the module docstring)."""
        return _sharing_repr(attrs.frozen, maybe_cls, options)

    def define(maybe_cls: type | None = None, /, **options: Any) -> Any:
        """``attrs.define``, sharing ``__repr__`` (see the module docstring)."""
        return _sharing_repr(attrs.define, maybe_cls, options)


#: Options that decide equality or hashing: a class given one is left to attrs for both.
_EQ_OPTIONS = frozenset({"eq", "order", "hash", "unsafe_hash", "cache_hash", "cmp"})


def _sharing_repr(make: Any, maybe_cls: type | None, options: dict[str, Any]) -> Any:
    def wrap(cls: type) -> type:
        own = cls.__dict__
        shared_repr = "repr" not in options and "__repr__" not in own
        shared_eq = not _EQ_OPTIONS & options.keys() and not {"__eq__", "__hash__"} & own.keys()
        made: type = make(
            cls,
            **({"repr": False} if shared_repr else {}),
            **({"eq": False} if shared_eq else {}),
            **options,
        )
        if shared_repr:
            made.__repr__ = attrs_repr  # type: ignore[assignment, method-assign]
        if shared_eq:
            made.__eq__ = attrs_eq  # type: ignore[assignment, method-assign]
            frozen = make is attrs.frozen or options.get("frozen", False)
            made.__hash__ = attrs_hash if frozen else None  # type: ignore[assignment, method-assign]
        return made

    return wrap if maybe_cls is None else wrap(maybe_cls)


#: The ids of the instances this thread is printing (attrs' own reprs keep such a set).
_printing = threading.local()


def attrs_repr(self: Any) -> str:
    """The ``__repr__`` of this package's attrs classes: the text attrs would write."""
    try:
        busy: set[int] = _printing.ids
    except AttributeError:
        busy = _printing.ids = set()
    if id(self) in busy:
        return "..."
    busy.add(id(self))
    try:
        parts = []
        for field in self.__attrs_attrs__:
            if field.repr is False:
                continue
            value = getattr(self, field.name, attrs.NOTHING)
            text = repr(value) if field.repr is True else field.repr(value)
            parts.append(f"{field.name}={text}")
        name = type(self).__qualname__.rsplit(">.", 1)[-1]
        return f"{name}({', '.join(parts)})"
    finally:
        busy.discard(id(self))


#: Each class's fields that take part in ``__eq__`` and in ``__hash__``, each with its key
#: (``None``: the value itself).
_eq_fields: dict[type, tuple[tuple[str, Any], ...]] = {}
_hash_fields: dict[type, tuple[tuple[str, Any], ...]] = {}


def _compared(cls: type) -> tuple[tuple[str, Any], ...]:
    fields = _eq_fields.get(cls)
    if fields is None:
        attributes: Any = cls.__attrs_attrs__  # type: ignore[attr-defined]
        fields = _eq_fields[cls] = tuple((a.name, a.eq_key) for a in attributes if a.eq)
    return fields


def _hashed(cls: type) -> tuple[tuple[str, Any], ...]:
    fields = _hash_fields.get(cls)
    if fields is None:
        attributes: Any = cls.__attrs_attrs__  # type: ignore[attr-defined]
        fields = _hash_fields[cls] = tuple(
            (a.name, a.eq_key) for a in attributes if a.hash is True or (a.hash is None and a.eq)
        )
    return fields


def attrs_eq(self: Any, other: Any) -> Any:
    """The ``__eq__`` of this package's attrs classes: what attrs' would return."""
    if other.__class__ is not self.__class__:
        return NotImplemented
    result: Any = True
    for name, key in _compared(self.__class__):
        if key is None:
            result = getattr(self, name) == getattr(other, name)
        else:
            result = key(getattr(self, name)) == key(getattr(other, name))
        if not result:
            return result
    return result


def attrs_hash(self: Any) -> int:
    """The ``__hash__`` of this package's frozen attrs classes: the class and the hashed
    fields' values (their keys, for a field compared by a key), as attrs' hashes them."""
    cls = self.__class__
    values = [
        getattr(self, name) if key is None else key(getattr(self, name))
        for name, key in _hashed(cls)
    ]
    return hash((id(cls), *values))
