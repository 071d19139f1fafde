"""``trio_session._core.classes``: attrs' decorators with one shared ``__repr__``, which must
print exactly what attrs' generated one prints."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from trio_session import AutoRetryStart, UserMessage
from trio_session._core.classes import attrs_repr, define, frozen


def _twins(decorate: Any, ours: Any) -> tuple[type, type]:
    """The same class body made by attrs (``decorate``) and by us (``ours``)."""

    def body() -> type:
        class Sample:
            name: str
            count: int = 0
            hidden: str = attrs.field(default="secret", repr=False)
            shown: list[int] = attrs.field(factory=list, repr=lambda v: f"<{len(v)} items>")
            later: int = attrs.field(default=7, init=False)
            inner: Any = None

        return Sample

    return decorate(body()), ours(body())


@pytest.mark.parametrize(
    ("theirs", "ours"),
    [(attrs.frozen, frozen), (attrs.define, define), (attrs.define(eq=False), define(eq=False))],
)
def test_the_shared_repr_prints_what_attrs_prints(theirs: Any, ours: Any) -> None:
    """Plain, hidden, custom-formatted, ``init=False`` and nested fields alike."""
    attrs_made, ours_made = _twins(theirs, ours)
    assert vars(ours_made)["__repr__"] is attrs_repr
    assert vars(attrs_made)["__repr__"] is not attrs_repr
    for args in [("a",), ("b\n'q'", 3), ("c", 1, "s", [1, 2])]:
        expected = repr(attrs_made(*args, inner=attrs_made("x")))
        assert repr(ours_made(*args, inner=ours_made("x"))) == expected
    assert "secret" not in repr(ours_made("a"))


def test_an_instance_inside_itself_prints_as_dots() -> None:
    """attrs prints ``...`` for an instance already being printed; so does ours."""
    attrs_made, ours_made = _twins(attrs.define, define)
    theirs, mine = attrs_made("loop"), ours_made("loop")
    theirs.inner, mine.inner = theirs, mine
    assert (
        repr(mine)
        == repr(theirs)
        == ("Sample(name='loop', count=0, shown=<0 items>, later=7, inner=...)")
    )
    assert repr(mine) == repr(theirs)  # the guard was released


def test_a_class_with_its_own_repr_keeps_it() -> None:
    """``repr=`` given, or a ``__repr__`` written in the body: attrs decides, as before."""

    @frozen
    class Own:
        x: int

        def __repr__(self) -> str:
            return "own"

    @frozen(repr=False)
    class Plain:
        x: int

    assert repr(Own(1)) == "own"
    assert "__repr__" not in vars(Plain)


def test_the_package_classes_use_it() -> None:
    """The public values print as they always did."""
    assert repr(AutoRetryStart(1, 3, 2000, "503")) == (
        "AutoRetryStart(attempt=1, max_attempts=3, delay_ms=2000, error_message='503',"
        " type='auto_retry_start')"
    )
    assert vars(type(UserMessage.of("hi")))["__repr__"] is attrs_repr
