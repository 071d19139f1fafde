"""The coding tools: pi 1.6.0's built-in tools, for a session that edits code.

``coding_tools(cwd)`` makes them, each taking relative paths from ``cwd``; a
session gets them only when asked (``open_session(tools=coding_tools(cwd))``).
``select_tools`` reads pi's selection (``--tools``, ``defaultTools``).

Which rule lives where:

- ``_common``: paths, pi's output limits (2000 lines, 50 KB), argument checks;
- ``_read``: ``read`` — lines from ``offset`` for ``limit``, within the limits;
- ``_edit``: ``edit`` — exact, unique, non-overlapping replacements — and ``write``;
- ``_bash``: ``bash`` — a command with a timeout, its process group killed on abort;
- ``_search``: the opt-in ``grep``, ``find`` and ``ls``;
- ``_prompt``: the system prompt naming them, and the context files it carries.

A tool's failure is its error result (``ToolError``), never an exception out of the
session. The tools run with the process's permissions: a path may lead anywhere
the process can read or write, and ``bash`` runs anything.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from .._agent.tools import Tool
from ._bash import bash_tool
from ._edit import edit_tool, write_tool
from ._read import read_tool
from ._search import find_tool, grep_tool, ls_tool

__all__ = [
    "CODING_TOOL_NAMES",
    "DEFAULT_TOOL_NAMES",
    "coding_tools",
    "default_tools",
    "select_tools",
]

#: pi's tools on by default (its ``defaultTools``).
DEFAULT_TOOL_NAMES = ("read", "bash", "edit", "write")

#: Every coding tool, in the order pi lists them.
CODING_TOOL_NAMES = ("read", "bash", "edit", "write", "grep", "find", "ls")

_MAKERS: dict[str, Callable[[Path], Tool]] = {
    "read": read_tool,
    "bash": bash_tool,
    "edit": edit_tool,
    "write": write_tool,
    "grep": grep_tool,
    "find": find_tool,
    "ls": ls_tool,
}


def coding_tools(cwd: str | Path, names: Iterable[str] = DEFAULT_TOOL_NAMES) -> tuple[Tool, ...]:
    """pi's coding tools, working in ``cwd``: ``read``, ``bash``, ``edit``, ``write`` by
    default; ``grep``, ``find`` and ``ls`` when named.

    Args:
        cwd: the working directory: relative paths start there, ``bash`` runs there.
        names: which tools, in this order (``CODING_TOOL_NAMES`` lists them all).

    Raises:
        ValueError: a name is not one of ``CODING_TOOL_NAMES``.
    """
    root = Path(cwd).resolve()
    tools = []
    for name in names:
        if name not in _MAKERS:
            known = ", ".join(CODING_TOOL_NAMES)
            msg = f"no coding tool is called {name!r} (the tools: {known})"
            raise ValueError(msg)
        tools.append(_MAKERS[name](root))
    return tuple(tools)


def _is_change(entry: str) -> bool:
    return entry[:1] in ("+", "-")


def default_tools(entries: Sequence[str] | None) -> list[str]:
    """The ``defaultTools`` setting as a selection (pi's ``resolveDefaultTools``).

    Its plain names are the base (pi's four when it has none, unless the list is
    empty: then none), and its ``+name`` / ``-name`` entries change that base in order;
    unset (``None``), pi's four.
    """
    if entries is None:
        return list(DEFAULT_TOOL_NAMES)
    plain = [e for e in entries if not _is_change(e)]
    base = plain if plain or not entries else list(DEFAULT_TOOL_NAMES)
    return _changed(base, [e for e in entries if _is_change(e)])


def _changed(base: Sequence[str], changes: Sequence[str]) -> list[str]:
    """``base`` with each ``+name`` added at the end and each ``-name`` removed, in order."""
    selected = list(dict.fromkeys(base))
    for change in changes:
        name = change[1:]
        if change[0] == "+" and name and name not in selected:
            selected.append(name)
        elif change[0] == "-" and name in selected:
            selected.remove(name)
    return selected


def select_tools(entries: Sequence[str], base: Sequence[str] = DEFAULT_TOOL_NAMES) -> list[str]:
    """A tool selection as pi reads ``--tools`` and ``defaultTools``.

    Plain names replace ``base``; a list of only ``+name`` and ``-name`` entries
    changes it (``+`` adds a tool at the end, ``-`` removes one). An empty list
    selects none.

    Raises:
        ValueError: plain names and ``+``/``-`` entries are mixed, or an entry is empty.
    """
    names = [e.strip() for e in entries]
    if any(not n or n in ("+", "-") for n in names):
        msg = f"an empty tool name in {','.join(entries)!r}"
        raise ValueError(msg)
    changes = [n for n in names if n[0] in "+-"]
    if not changes:
        return list(dict.fromkeys(names))
    if len(changes) != len(names):
        msg = f"plain tool names and +name/-name entries cannot be mixed: {','.join(entries)!r}"
        raise ValueError(msg)
    selected = list(base)
    for change in changes:
        name = change[1:]
        if change[0] == "+" and name not in selected:
            selected.append(name)
        elif change[0] == "-" and name in selected:
            selected.remove(name)
    return selected
