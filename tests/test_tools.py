"""Tools from plain functions: schemas from hints and docstrings, argument checks, results."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, NotRequired, Optional, TypedDict

import attrs
import pytest
import trio

from trio_session import (
    FauxProvider,
    FauxReply,
    ImageContent,
    TextContent,
    Tool,
    ToolArgumentError,
    ToolCall,
    ToolOutput,
    ToolResultMessage,
    TrioSessionError,
    open_session,
    tool,
)


def get_weather(
    city: str,
    unit: Literal["c", "f"] = "c",
    days: Optional[int] = None,  # noqa: UP045
) -> str:
    """Get the weather forecast for a city."""
    return f"{city}: 21 {unit} for {days or 1} day(s)"


async def run_calls(t: Tool, *arguments: Mapping[str, Any]) -> list[ToolResultMessage]:
    """Run one tool call per ``arguments`` through a real session; the tool results."""
    calls = [FauxReply(tool_calls=(ToolCall(str(i), t.name, a),)) for i, a in enumerate(arguments)]
    provider = FauxProvider([*calls, FauxReply(text="done")])
    async with open_session(provider, tools=[t]) as session:
        reply = await session.prompt("go")
        history = session.history
    assert reply.text == "done"
    assert provider.requests[0].tools[0].parameters == t.parameters
    return [m for m in history if isinstance(m, ToolResultMessage)]


async def call(t: Tool, **arguments: Any) -> str:
    """The result text of calling the tool directly."""
    result = await t.execute(arguments)
    assert isinstance(result, str)
    return result


def test_acceptance_schema_with_defaults_optional_and_literal() -> None:
    """Acceptance: defaults, Optional and Literal parameters give this exact schema."""
    t = Tool.from_function(get_weather)
    assert (t.name, t.description) == ("get_weather", "Get the weather forecast for a city.")
    assert t.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
            "days": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
        },
        "required": ["city"],
        "additionalProperties": False,
    }


def test_optional_without_default_is_required_and_nullable() -> None:
    """``X | None`` without a default is required and nullable; a mixed Literal has no type."""

    def f(when: int | None, mode: Literal[1, "auto", True, None] = "auto") -> None:
        """F."""

    assert Tool.from_function(f).parameters == {
        "type": "object",
        "properties": {
            "when": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "mode": {"enum": [1, "auto", True, None], "default": "auto"},
        },
        "required": ["when"],
        "additionalProperties": False,
    }


def test_descriptions_come_from_the_docstring() -> None:
    """The summary paragraph describes the tool; Args entries (joined lines) the parameters."""

    def search(query: str, limit: int = 10, *, exact: bool = False) -> list[str]:
        """Search the notes
        for a phrase.

        Longer text that is not the summary.

        Args:
            query (str): the words to look for,
                in any order.
            limit: at most this many hits.

                Counted after de-duplication.
            exact: match the phrase exactly.

        Returns:
            query: not a parameter description.
        """
        return []

    t = tool(search)
    assert t.description == "Search the notes for a phrase."
    assert t.parameters["properties"] == {
        "query": {"type": "string", "description": "the words to look for, in any order."},
        "limit": {
            "type": "integer",
            "description": "at most this many hits. Counted after de-duplication.",
            "default": 10,
        },
        "exact": {"type": "boolean", "description": "match the phrase exactly.", "default": False},
    }


def test_annotated_text_and_decorator_arguments() -> None:
    """``Annotated[X, "text"]`` describes a value; ``@tool(name=, description=)`` override."""

    @tool(name="lookup", description="Look a word up.")
    def f(
        word: Annotated[str, "the word"],
        langs: list[Annotated[str, "an ISO code"]] | None = None,
    ) -> str:
        """Ignored summary.

        Args:
            word: loses to the Annotated text.
            langs: languages.
        """
        return word

    assert isinstance(f, Tool)
    assert (f.name, f.description) == ("lookup", "Look a word up.")
    assert f.parameters["properties"] == {
        "word": {"type": "string", "description": "the word"},
        "langs": {
            "anyOf": [
                {"type": "array", "items": {"type": "string", "description": "an ISO code"}},
                {"type": "null"},
            ],
            "description": "languages.",
            "default": None,
        },
    }


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Size(enum.IntEnum):
    S = 1
    M = 2


class Address(TypedDict):
    street: str
    zip: NotRequired[str]


@dataclasses.dataclass(frozen=True)
class Point:
    """A point.

    Attributes:
        x: across.
        y: up.
    """

    x: float
    y: float = 0.0


@attrs.frozen
class Box:
    corner: Point
    tags: list[str] = attrs.field(factory=list)
    _label: str = "box"


def test_schema_of_containers_enums_and_nested_types() -> None:
    """Containers, Enum classes, TypedDict, dataclass and attrs classes have these schemas."""

    def f(
        color: Color,
        size: Size,
        pair: tuple[int, str],
        many: tuple[int, ...],
        ids: set[int],
        scores: dict[str, float],
        address: Address,
        box: Box,
        anything: Any = None,
    ) -> None:
        """F."""

    point = {
        "type": "object",
        "properties": {
            "x": {"type": "number", "description": "across."},
            "y": {"type": "number", "description": "up.", "default": 0.0},
        },
        "required": ["x"],
        "additionalProperties": False,
    }
    assert Tool.from_function(f).parameters == {
        "type": "object",
        "properties": {
            "color": {"type": "string", "enum": ["red", "green"]},
            "size": {"type": "integer", "enum": [1, 2]},
            "pair": {
                "type": "array",
                "prefixItems": [{"type": "integer"}, {"type": "string"}],
                "minItems": 2,
                "maxItems": 2,
            },
            "many": {"type": "array", "items": {"type": "integer"}},
            "ids": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
            "scores": {"type": "object", "additionalProperties": {"type": "number"}},
            "address": {
                "type": "object",
                "properties": {"street": {"type": "string"}, "zip": {"type": "string"}},
                "required": ["street"],
                "additionalProperties": False,
            },
            "box": {
                "type": "object",
                "properties": {
                    "corner": point,
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "label": {"type": "string", "default": "box"},
                },
                "required": ["corner"],
                "additionalProperties": False,
            },
            "anything": {"default": None},
        },
        "required": ["color", "size", "pair", "many", "ids", "scores", "address", "box"],
        "additionalProperties": False,
    }


async def test_arguments_arrive_as_the_hinted_types() -> None:
    """Enum members, tuples, sets, floats and class instances reach the function."""
    seen: dict[str, Any] = {}

    @tool
    def f(
        color: Color, pair: tuple[int, str], ids: set[int], x: float, box: Box, address: Address
    ) -> None:
        """F."""
        seen.update(color=color, pair=pair, ids=ids, x=x, box=box, address=address)

    arguments = {
        "color": "green",
        "pair": [1, "a"],
        "ids": [3, 1],
        "x": 2,
        "box": {"corner": {"x": 1}, "label": "b"},
        "address": {"street": "Main"},
    }
    assert await f.execute(arguments) == ""
    assert seen == {
        "color": Color.GREEN,
        "pair": (1, "a"),
        "ids": {1, 3},
        "x": 2.0,
        "box": Box(Point(1.0, 0.0), [], "b"),
        "address": {"street": "Main"},
    }
    assert type(seen["x"]) is float


async def test_async_tool_runs_in_a_session() -> None:
    """An async function's result goes back to the model as a tool result."""

    @tool
    async def add(a: int, b: int = 1) -> int:
        """Add two numbers."""
        await trio.lowlevel.checkpoint()
        return a + b

    [result] = await run_calls(add, {"a": 2, "b": 3})
    assert (result.tool_name, result.content, result.is_error) == (
        "add",
        (TextContent("5"),),
        False,
    )


async def test_sync_tool_runs_in_a_session() -> None:
    """A sync function runs inline; its str result is the tool result as it is."""
    [result] = await run_calls(Tool.from_function(get_weather), {"city": "Oslo", "days": 3})
    assert (result.text, result.is_error) == ("Oslo: 21 c for 3 day(s)", False)


async def test_bad_arguments_go_back_as_an_error_and_the_model_retries() -> None:
    """Arguments that fail the check are an error result; the function does not run."""
    ran: list[str] = []

    @tool
    def greet(name: str) -> str:
        """Greet someone."""
        ran.append(name)
        return f"hi {name}"

    bad, good = await run_calls(greet, {"name": 7}, {"name": "Ann"})
    assert (bad.text, bad.is_error) == (
        'ToolArgumentError: invalid arguments for tool "greet": "name" must be a string, not 7',
        True,
    )
    assert (good.text, good.is_error) == ("hi Ann", False)
    assert ran == ["Ann"]


def nested(
    box: Box,
    points: list[Point],
    scores: dict[str, float] | None = None,
    pair: tuple[int, int] = (0, 0),
    ids: set[int] | None = None,
) -> None:
    """Nested."""


INVALID = [
    (get_weather, {}, '"city" is required'),
    (get_weather, {"city": "Oslo", "when": 1}, 'unknown argument "when"'),
    (get_weather, {"city": 3}, '"city" must be a string, not 3'),
    (get_weather, {"city": "Oslo", "days": True}, '"days" must be an integer or null, not true'),
    (get_weather, {"city": "Oslo", "days": 2.0}, '"days" must be an integer or null, not 2.0'),
    (get_weather, {"city": None}, '"city" must be a string, not null'),
    (get_weather, {"city": "Oslo", "unit": "k"}, '"unit" must be one of "c", "f", not "k"'),
    (
        get_weather,
        {"city": 1, "unit": "K", "days": "2", "x": 0, "y": 0},
        '"city" must be a string, not 1; "unit" must be one of "c", "f", not "K"; '
        '"days" must be an integer or null, not "2"; unknown argument "x"; unknown argument "y"',
    ),
    (
        nested,
        {"box": {"corner": {"y": "0"}, "size": 1}, "points": [{"x": 1}, {"x": False}]},
        '"box.corner.x" is required; "box.corner.y" must be a number, not "0"; '
        'unknown key "size" in "box"; "points[1].x" must be a number, not false',
    ),
    (
        nested,
        {"box": [], "points": {}, "scores": {"a": "1"}},
        '"box" must be an object, not []; "points" must be an array, not {}; '
        '"scores.a" must be a number, not "1"',
    ),
    (
        nested,
        {"box": {"corner": {"x": 0}}, "points": [], "pair": [1], "ids": [1, 1]},
        '"pair" must be an array of 2 items, not [1]; "ids" must not repeat an item, not [1, 1]',
    ),
]


@pytest.mark.parametrize(("fn", "arguments", "problems"), INVALID)
async def test_invalid_arguments_are_named_in_one_message(
    fn: Any, arguments: dict[str, Any], problems: str
) -> None:
    """Each problem is named, all in one ToolArgumentError, before the function runs."""
    t = Tool.from_function(fn)
    message = f'invalid arguments for tool "{t.name}": {problems}'
    with pytest.raises(ToolArgumentError, match=f"^{re.escape(message)}$") as info:
        await t.execute(arguments)
    assert isinstance(info.value, TrioSessionError)
    assert isinstance(info.value, ValueError)
    assert (info.value.tool, "; ".join(info.value.problems)) == (t.name, problems)


async def test_many_problems_are_cut_short_in_the_message() -> None:
    """Past ten problems the message counts the rest; ``problems`` keeps them all."""

    @tool
    def f(xs: list[int]) -> None:
        """F."""

    with pytest.raises(ToolArgumentError) as info:
        await f.execute({"xs": ["a"] * 12})
    assert len(info.value.problems) == 12
    assert str(info.value).endswith('"xs[9]" must be an integer, not "a"; and 2 more problems')


@attrs.frozen
class Range:
    low: int = attrs.field(validator=attrs.validators.ge(0))


async def test_class_validation_is_a_problem_too() -> None:
    """A nested class that rejects its values is reported like any other problem."""

    def f(r: Range) -> None:
        """F."""

    t = Tool.from_function(f)
    with pytest.raises(ToolArgumentError) as info:
        await t.execute({"r": {"low": -1}})
    assert info.value.problems == ("\"r\" is not valid: 'low' must be >= 0: -1",)


def takes_args(*names: str) -> None:
    """Star args."""


def takes_kwargs(**options: str) -> None:
    """Star kwargs."""


def no_hint(city, days: int) -> None:  # type: ignore[no-untyped-def]
    """No hint."""


def takes_datetime(when: datetime.datetime) -> None:
    """Datetime."""


def int_keys(counts: dict[int, str]) -> None:
    """Int keys."""


def set_of_lists(groups: set[tuple[list[int], str]]) -> None:
    """Set of lists."""


@dataclasses.dataclass
class Tree:
    children: list[Tree]


def recursive(tree: Tree) -> None:
    """Recursive."""


def unresolved(x: Missing) -> None:  # type: ignore[name-defined]  # noqa: F821
    """Unresolved."""


def fn_name(fn: Any) -> str:
    """How decoration errors name a function."""
    return f'the function {fn.__qualname__} (tool "{fn.__name__}")'


@pytest.mark.parametrize(
    ("fn", "message"),
    [
        (
            takes_args,
            "{f} takes *names, which a tool cannot describe: {name_each}",
        ),
        (
            takes_kwargs,
            "{f} takes **options, which a tool cannot describe: {name_each}",
        ),
        (
            no_hint,
            'the parameter "city" of {f} has no type hint;'
            " annotate it, since the model needs its JSON schema.",
        ),
        (
            takes_datetime,
            'the parameter "when" of {f} has the type datetime, which a tool cannot take:'
            " datetime has no JSON schema.",
        ),
        (
            int_keys,
            'the parameter "counts" of {f} has the type dict[int, str], which a tool cannot'
            " take: the keys of dict[int, str] are not str (JSON keys are).",
        ),
        (
            set_of_lists,
            'the parameter "groups" of {f} has the type set[tuple[list[int], str]], which a'
            " tool cannot take: the items of set[tuple[list[int], str]] cannot be put in a set"
            " (use str, int, float, bool, Literal, Enum, or tuples of them).",
        ),
        (
            recursive,
            'the parameter "tree" of {f} has the type Tree, which a tool cannot take:'
            " Tree contains itself.",
        ),
        (
            unresolved,
            "{f} cannot be a tool: its type hints cannot be resolved"
            " (name 'Missing' is not defined).",
        ),
    ],
)
def test_functions_a_tool_cannot_describe(fn: Any, message: str) -> None:
    """Functions with no schema for their parameters raise TypeError when decorated."""
    name_each = "name each parameter the model may pass."
    expected = message.format(f=fn_name(fn), name_each=name_each)
    with pytest.raises(TypeError, match=f"^{re.escape(expected)}$"):
        tool(fn)


def test_a_tool_name_must_be_valid() -> None:
    """A lambda (or a bad ``name=``) is a ValueError that says to pass ``name=``."""
    message = (
        "the tool name '<lambda>' is not valid: use 1 to 64 letters, digits, _ or -"
        " (pass name= to choose one)."
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        Tool.from_function(lambda x: x)
    assert Tool.from_function(lambda: "ok", name="ok").name == "ok"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("plain text", "plain text"),
        (None, ""),
        (42, "42"),
        ({"city": "Zürich", "temps": [1.5, 2]}, '{"city": "Zürich", "temps": [1.5, 2]}'),
        ([datetime.date(2024, 5, 1)], '["2024-05-01"]'),
    ],
)
async def test_return_values_become_text(value: object, text: str) -> None:
    """A str is the result as it is, None is "", anything else JSON (str() for the rest)."""

    @tool
    async def f() -> object:
        """F."""
        return value

    assert await f.execute({}) == text


async def test_positional_only_parameters_and_bound_methods() -> None:
    """Positional-only parameters get their defaults when left out; methods work."""

    class Greeter:
        def greet(self, name: str, /, greeting: str = "hi", punct: str = "!") -> str:
            """Greet."""
            return f"{greeting} {name}{punct}"

    t = Tool.from_function(Greeter().greet)
    assert t.parameters["required"] == ["name"]
    assert await call(t, name="Ann", punct="?") == "hi Ann?"
    assert t.execute.function.__name__ == "greet"  # type: ignore[attr-defined]


def test_sequence_parameters() -> None:
    """``Sequence[X]`` is an array of X."""

    def f(xs: Sequence[int]) -> None:
        """F."""

    assert Tool.from_function(f).parameters["properties"]["xs"] == {
        "type": "array",
        "items": {"type": "integer"},
    }


def test_the_docs_example_shows_a_retry_after_bad_arguments() -> None:
    """docs/examples/tools.py: the bad unit is an error result, the retry succeeds."""
    example = Path(__file__).parent.parent / "docs" / "examples" / "tools.py"
    out = subprocess.run(
        [sys.executable, str(example)], capture_output=True, text=True, timeout=60, check=True
    ).stdout.splitlines()
    assert out[0] == "get_weather: Get the weather forecast for a city."
    assert out[-3:] == [
        'tool result (error): ToolArgumentError: invalid arguments for tool "get_weather":'
        ' "unit" must be one of "c", "f", not "k"',
        'tool result (ok): {"city": "Oslo", "temperature": 21, "unit": "c", "days": 1}',
        "reply: It is 21 °C in Oslo.",
    ]


async def test_a_function_may_return_a_tool_output_with_an_image() -> None:
    """A ToolOutput is the result as it is: its text and image parts reach the history,
    its details beside them."""
    chart = ImageContent("aW1n", "image/png")

    @tool
    def draw(title: str) -> ToolOutput:
        """Draw a chart.

        Args:
            title: the chart's title.
        """
        return ToolOutput((TextContent(f"chart: {title}"), chart), {"points": 3})

    (result,) = await run_calls(draw, {"title": "sales"})
    assert result.content == (TextContent("chart: sales"), chart)
    assert result.details == {"points": 3}
    assert not result.is_error
