"""``trio_session._core.classes``: attrs' decorators with one shared ``__repr__``,
``__eq__`` and ``__hash__``, which must print, compare and hash exactly as attrs'
generated ones do."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from trio_session import AutoRetryStart, UserMessage
from trio_session._core.classes import attrs_eq, attrs_hash, attrs_repr, define, frozen


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


def _eq_twins(decorate: Any, ours: Any) -> tuple[type, type]:
    """The same class body, with every kind of field equality, by attrs and by us."""

    def body() -> type:
        class Sample:
            name: str
            count: int = 0
            ignored: str = attrs.field(default="", eq=False)
            folded: str = attrs.field(default="", eq=str.lower)
            unhashed: Any = attrs.field(factory=dict, hash=False)

        return Sample

    return decorate(body()), ours(body())


EQ_CASES: list[tuple[tuple[Any, ...], tuple[Any, ...]]] = [
    (("a",), ("a",)),
    (("a",), ("b",)),
    (("a", 1), ("a", 2)),
    (("a", 1, "x"), ("a", 1, "y")),  # ignored differs: still equal
    (("a", 1, "", "AbC"), ("a", 1, "", "abc")),  # folded by its key: equal
    (("a", 1, "", "abc"), ("a", 1, "", "abd")),
    (("a", 1, "", "", {"k": 1}), ("a", 1, "", "", {"k": 2})),
    (("a", float("nan")), ("a", float("nan"))),  # nan != nan, field by field
]


@pytest.mark.parametrize(("theirs", "ours"), [(attrs.frozen, frozen), (attrs.define, define)])
def test_the_shared_eq_answers_what_attrs_answers(theirs: Any, ours: Any) -> None:
    """``==`` and ``!=`` between instances of one class, and against another class."""
    attrs_made, ours_made = _eq_twins(theirs, ours)
    assert vars(ours_made)["__eq__"] is attrs_eq
    for left, right in EQ_CASES:
        expected = attrs_made(*left) == attrs_made(*right)
        assert (ours_made(*left) == ours_made(*right)) is expected, (left, right)
        assert (ours_made(*left) != ours_made(*right)) is (not expected)
    assert ours_made("a").__eq__(attrs_made("a")) is NotImplemented
    assert ours_made("a") != attrs_made("a")


def test_the_shared_hash_hashes_what_attrs_hashes() -> None:
    """Frozen: equal values hash alike, ``hash=False`` fields (even unhashable) are left
    out, keyed fields hash their key; ``define`` classes stay unhashable."""
    attrs_made, ours_made = _eq_twins(attrs.frozen, frozen)
    assert vars(ours_made)["__hash__"] is attrs_hash
    for left, right in EQ_CASES:
        if attrs_made(*left) == attrs_made(*right):
            assert hash(ours_made(*left)) == hash(ours_made(*right)), (left, right)
    assert len({ours_made("a", 1), ours_made("a", 1, "x"), ours_made("a", 2)}) == 2
    mutable_attrs, mutable_ours = _eq_twins(attrs.define, define)
    assert mutable_attrs.__hash__ is mutable_ours.__hash__ is None


def test_a_class_that_decides_its_equality_keeps_attrs() -> None:
    """``eq=``/``hash=``-like options, or an ``__eq__`` written in the body: attrs decides."""

    @define(eq=False)
    class Service:
        x: int

    @frozen(order=True)
    class Ordered:
        x: int

    @frozen
    class Own:
        x: int

        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = object.__hash__

    assert Service(1) != Service(1)
    assert Service.__hash__ is object.__hash__
    assert vars(Ordered)["__eq__"] is not attrs_eq
    assert Ordered(1) < Ordered(2)
    assert Own(1) == Own(2)


def test_the_package_classes_compare_by_value() -> None:
    """The public values compare and hash as they always did."""
    event = AutoRetryStart(1, 3, 2000, "503")
    assert event == AutoRetryStart(1, 3, 2000, "503")
    assert event != AutoRetryStart(2, 3, 2000, "503")
    assert hash(event) == hash(AutoRetryStart(1, 3, 2000, "503"))
    assert vars(AutoRetryStart)["__eq__"] is attrs_eq
