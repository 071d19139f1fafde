"""What the coding tools share: paths, pi's output limits, the checks of their arguments.

Paths resolve as pi's tools resolve them (``resolveToCwd``): ``~`` is the home
directory, a leading ``@`` (as a user types a file reference) is dropped, odd Unicode
spaces become plain ones, and a relative path is taken from the session's working
directory. An absolute path, or one with ``..``, may reach outside it: like pi's,
the tools are no sandbox (they run with the process's permissions).

The limits are pi's ``truncate.ts``: at most ``DEFAULT_MAX_LINES`` lines and
``DEFAULT_MAX_BYTES`` bytes of output, whichever comes first; ``truncate_head``
keeps the first whole lines within both.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._core.classes import frozen
from .._core.errors import ToolError
from .._session.bash_run import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES

__all__ = [
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_LINES",
    "Head",
    "Param",
    "check_arguments",
    "count_lines",
    "format_size",
    "js_number",
    "parameters_schema",
    "resolve_path",
    "tail_of_file",
    "truncate_head",
]

#: Unicode spaces a path may carry from a copied name (pi's ``normalizeUnicodeSpaces``).
_ODD_SPACES = re.compile("[\u00a0\u2000-\u200a\u202f\u205f\u3000]")


def resolve_path(path: str, cwd: Path) -> Path:
    """``path`` as pi's tools take it, relative to ``cwd`` (see the module's docstring)."""
    text = _ODD_SPACES.sub(" ", path)
    if text.startswith("@"):
        text = text[1:]
    if text == "~" or text.startswith("~/"):
        text = str(Path.home()) + text[1:]
    return Path(os.path.normpath(cwd / text))


def format_size(size: int) -> str:
    """A byte count as pi writes it: ``512B``, ``50.0KB``, ``1.5MB``."""
    if size < 1024:
        return f"{size}B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f}KB"
    return f"{size / (1024 * 1024):.1f}MB"


def js_number(value: float) -> str:
    """A number as JavaScript prints it: ``5``, ``0.5`` (pi's messages echo its arguments)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def count_lines(text: str) -> list[str]:
    """The lines of ``text`` as pi counts them: a final newline ends a line, opens none."""
    if not text:
        return []
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return lines


@frozen
class Head:
    """The first lines of a text within the limits (pi's ``truncateHead`` result).

    Attributes:
        content: the lines kept, joined.
        truncated: whether anything was left out.
        by_lines: it was cut by the line limit (else by the byte limit).
        output_lines: how many lines were kept.
        first_line_too_long: the first line alone passes the byte limit (nothing kept).
    """

    content: str
    truncated: bool
    by_lines: bool
    output_lines: int
    first_line_too_long: bool = False


def truncate_head(
    text: str, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES
) -> Head:
    """The first whole lines of ``text`` within ``max_lines`` and ``max_bytes``."""
    lines = count_lines(text)
    if len(lines) <= max_lines and len(text.encode("utf-8")) <= max_bytes:
        return Head(text, False, False, len(lines))
    if len(lines[0].encode("utf-8")) > max_bytes:
        return Head("", True, False, 0, first_line_too_long=True)
    kept: list[str] = []
    size = 0
    by_lines = True
    for line in lines[:max_lines]:
        line_bytes = len(line.encode("utf-8")) + (1 if kept else 0)
        if size + line_bytes > max_bytes:
            by_lines = False
            break
        kept.append(line)
        size += line_bytes
    return Head("\n".join(kept), True, by_lines, len(kept))


def tail_of_file(path: Path) -> tuple[str, int]:
    """The last whole lines of the file at ``path`` within pi's limits, and how many
    lines it has (counted as ``count_lines`` does), read without holding all of it."""
    total = 0
    last = b""
    with path.open("rb") as file:
        while chunk := file.read(1 << 16):
            total += chunk.count(b"\n")
            last = chunk
    if last and not last.endswith(b"\n"):
        total += 1
    size = path.stat().st_size
    with path.open("rb") as file:
        file.seek(max(0, size - 2 * DEFAULT_MAX_BYTES - 4))
        text = file.read().decode("utf-8", errors="replace")
    lines = count_lines(text)
    kept: list[str] = []
    used = 0
    for line in reversed(lines[-DEFAULT_MAX_LINES:]):
        line_bytes = len(line.encode("utf-8")) + (1 if kept else 0)
        if used + line_bytes > DEFAULT_MAX_BYTES:
            if not kept:  # one line longer than the limit: its end
                kept.append(line.encode("utf-8")[-DEFAULT_MAX_BYTES:].decode("utf-8", "ignore"))
            break
        kept.append(line)
        used += line_bytes
    return "\n".join(reversed(kept)), total


@frozen
class Param:
    """One parameter of a coding tool: its name, its JSON type, whether it is required.

    Attributes:
        name: the argument's name.
        kind: ``"string"``, ``"number"``, ``"boolean"`` or ``"edits"`` (edit's list).
        description: what it is, for the model (pi's words).
        required: whether the model must pass it.
    """

    name: str
    kind: str
    description: str
    required: bool = True

    @property
    def schema(self) -> dict[str, Any]:
        """The parameter's JSON schema, as pi declares it."""
        if self.kind != "edits":
            return {"type": self.kind, "description": self.description}
        return {
            "type": "array",
            "description": self.description,
            "items": {
                "type": "object",
                "properties": {
                    "oldText": {"type": "string", "description": _OLD_TEXT},
                    "newText": {"type": "string", "description": _NEW_TEXT},
                },
                "required": ["oldText", "newText"],
            },
        }


_OLD_TEXT = (
    "Exact text for one targeted replacement. It must be unique in the original file and"
    " must not overlap with any other edits[].oldText in the same call."
)
_NEW_TEXT = "Replacement text for this targeted edit."


def parameters_schema(params: tuple[Param, ...]) -> dict[str, Any]:
    """The tool's ``parameters``: an object of ``params``, the required ones named."""
    schema: dict[str, Any] = {"type": "object", "properties": {p.name: p.schema for p in params}}
    if required := [p.name for p in params if p.required]:
        schema["required"] = required
    return schema


def check_arguments(tool: str, params: tuple[Param, ...], arguments: Mapping[str, Any]) -> None:
    """Raise a ``ToolError`` naming every argument that does not fit ``params``.

    As pi's validation, an argument it does not declare is let through (and not used).
    """
    problems: list[str] = []
    for param in params:
        if param.name not in arguments or arguments[param.name] is None:
            if param.required:
                problems.append(f'"{param.name}" is required')
            continue
        value = arguments[param.name]
        fits = {
            "string": isinstance(value, str),
            "number": isinstance(value, int | float)
            and not isinstance(value, bool)
            and math.isfinite(value),
            "boolean": isinstance(value, bool),
            "edits": isinstance(value, list)
            and all(
                isinstance(e, dict)
                and isinstance(e.get("oldText"), str)
                and isinstance(e.get("newText"), str)
                for e in value
            ),
        }[param.kind]
        if not fits:
            wanted = "a list of {oldText, newText}" if param.kind == "edits" else f"a {param.kind}"
            problems.append(f'"{param.name}" must be {wanted}, not {value!r}')
    if problems:
        msg = f'Validation failed for tool "{tool}": ' + "; ".join(problems)
        raise ToolError(msg)
