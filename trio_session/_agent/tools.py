"""Tools: ``Tool``, the function the model may call, and tools from plain Python functions.

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
a ``str`` as it is, ``None`` as ``""``, anything else as JSON — but a ``ToolOutput``
(text and image parts, ``details``) is the result as it is.

The schema and the checks are built by ``tool_schema.py``; this module turns them into a
``Tool``.
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, overload

import attrs

from .._core.classes import frozen
from .._core.errors import ToolError, TrioSessionError
from .._core.events import ToolOutput
from .._core.json_bounds import MAX_JSON_DEPTH, TOO_DEEP, json_depth
from ..providers._base import ToolSpec
from .tool_schema import (
    NO_DEFAULT,
    Field,
    Node,
    Unsupported,
    json_value,
    node_of,
    object_node,
    parse_docstring,
    type_hints,
    type_name,
)

__all__ = ["Tool", "ToolArgumentError", "ToolError", "function_tool", "tool"]

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


@frozen
class Tool:
    """An async function the model may call.

    Attributes:
        name: the name the model uses.
        execute: ``async (arguments) -> str``, or a ``ToolOutput`` for a result with
            image parts (``read`` of an image) or ``details``; an exception becomes an
            error result (a ``ToolError``'s message as it is, others with their type's
            name).
        description: what the tool does, for the model.
        parameters: JSON schema of the arguments.
    """

    name: str
    execute: Callable[[Mapping[str, Any]], Awaitable[str | ToolOutput]]
    description: str = ""
    parameters: Mapping[str, Any] = attrs.field(
        factory=lambda: {"type": "object", "properties": {}}
    )

    @classmethod
    def from_function(
        cls, fn: Callable[..., Any], *, name: str | None = None, description: str | None = None
    ) -> Tool:
        """A tool that calls ``fn``, sync or async, with arguments checked against its hints.

        The JSON schema of the arguments comes from ``fn``'s type hints: ``str``,
        ``int``, ``float``, ``bool``, ``None``, ``X | None``, ``Literal``, ``Enum``
        subclasses, ``list`` / ``tuple`` / ``set`` / ``dict[str, X]``, ``Any``, and
        nested ``TypedDict``, dataclass and attrs classes. A parameter with a default is
        not required (its JSON-able default is shown); ``Annotated[X, "text"]`` and the
        docstring's ``Args:`` entries describe parameters; the docstring's summary
        paragraph describes the tool. No additional arguments are allowed.

        Before ``fn`` runs, the model's arguments are checked: a missing or unknown
        argument, a value of the wrong type (``bool`` is not an integer; an integer is
        taken for a float) or outside a ``Literal`` / ``Enum`` raises
        ``ToolArgumentError`` naming every problem, which the model gets as the error
        result. A sync ``fn`` runs inline in the agent's task (a blocking one should
        be async, or use ``trio.to_thread.run_sync`` itself). What ``fn`` returns is
        the result: a ``str`` as it is, ``None`` as ``""``, a ``ToolOutput`` (text and
        image parts) as it is, anything else as JSON.

        Args:
            fn: the function.
            name: the tool's name; ``fn.__name__`` if not given.
            description: what the tool does; the docstring's summary if not given.

        Raises:
            TypeError: ``fn`` takes ``*args`` / ``**kwargs``, a parameter has no type
                hint, or a hint has no JSON schema (the message names the parameter).
            ValueError: the name is not 1 to 64 letters, digits, ``_`` or ``-``.
        """
        return function_tool(cls, fn, name=name, description=description)

    @property
    def spec(self) -> ToolSpec:
        """The tool as sent to the model."""
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)


def _encode_result(value: object) -> str:
    """A tool's return value as the result text."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


# --- functions as tools ---------------------------------------------------------------------


@frozen
class _FunctionCall:
    """A tool's ``execute``: checks the arguments, then calls the function.

    Attributes:
        function: the function the tool was made from.
    """

    function: Callable[..., Any]
    _tool: str
    _arguments: Node
    _positional: tuple[tuple[str, Any], ...]  # positional-only parameters and defaults

    async def __call__(self, arguments: Mapping[str, Any]) -> str | ToolOutput:
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
        return result if isinstance(result, ToolOutput) else _encode_result(result)


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
        hints = type_hints(fn)
    except Unsupported as exc:
        msg = f"{what} cannot be a tool: {exc}."
        raise TypeError(msg) from exc
    summary, described = parse_docstring(inspect.getdoc(fn) or "")
    fields: list[Field] = []
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
            node = node_of(hint, ())
        except Unsupported as exc:
            msg = (
                f'the parameter "{param.name}" of {what} has the type {type_name(hint)},'
                f" which a tool cannot take: {exc}."
            )
            raise TypeError(msg) from exc
        required = param.default is param.empty
        default = NO_DEFAULT if required else json_value(param.default)
        fields.append(Field(param.name, node, required, default, described.get(param.name, "")))
        if param.kind is param.POSITIONAL_ONLY:
            positional.append((param.name, param.default))
    arguments = object_node(fields, dict)
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
    if fn is not None:
        return Tool.from_function(fn, name=name, description=description)

    def decorate(fn: Callable[..., Any]) -> Tool:
        return Tool.from_function(fn, name=name, description=description)

    return decorate
