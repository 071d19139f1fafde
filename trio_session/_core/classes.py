"""How this package makes its classes: attrs' ``frozen`` and ``define``, with one
``__repr__`` shared by every class instead of one written for each.

attrs writes the source of a ``__repr__`` for every class it makes and compiles it with
the class's other methods; the repr is about a third of that work, some 0.1 ms a class.
The package makes over 200 classes, about 170 of them before ``trio-session rpc`` answers
its first command: 20 ms of a 165 ms start (``rpc.spawn``, docs/benchmarks.md).

The shared ``__repr__`` prints what attrs' own would: ``Name(field=value, …)``, only the
fields their ``repr`` option leaves in (a callable ``repr`` formats its field), and
``...`` for an instance already being printed further up the same repr. A class that
writes its own ``__repr__``, or passes ``repr=``, is left to attrs.

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


def _sharing_repr(make: Any, maybe_cls: type | None, options: dict[str, Any]) -> Any:
    def wrap(cls: type) -> type:
        if "repr" in options or "__repr__" in cls.__dict__:
            return make(cls, **options)  # type: ignore[no-any-return]
        made: type = make(cls, repr=False, **options)
        made.__repr__ = attrs_repr  # type: ignore[assignment, method-assign]
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
