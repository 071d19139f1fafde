"""``edit``: exact, unique text replacements in one file, and ``write``.

As pi 1.6.0's edit tool:

- every ``edits[i].oldText`` is looked up in the original file (not after the edits
  before it), with line endings taken as ``\\n`` on both sides and a byte order
  mark set aside;
- it must be found once: absent, or found more than once, or overlapping another
  edit, or empty, the call fails with pi's message and the file is left as it was;
- when the exact text is absent, a looser match is tried — trailing spaces of each
  line, typographic quotes, dashes and odd spaces, and Unicode compatibility forms
  count as their plain forms (pi's ``normalizeForFuzzyMatch``); the lines it touches
  are then rewritten in the plain form, the others keep their bytes;
- the file keeps its line endings (``\\r\\n`` stays ``\\r\\n``, also in the new text)
  and its byte order mark.

``write`` creates or replaces a file, with any missing parent directory.
"""

from __future__ import annotations

import errno
import itertools
import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import trio

from .._agent.tools import Tool
from .._core.classes import frozen
from .._core.errors import ToolError
from ._common import Param, check_arguments, parameters_schema, resolve_path
from ._read import os_error_text

PARAMS = (
    Param("path", "string", "Path to the file to edit (relative or absolute)"),
    Param(
        "edits",
        "edits",
        "One or more targeted replacements. Each edit is matched against the original file,"
        " not incrementally. Do not include overlapping or nested edits. If two changes touch"
        " the same block or nearby lines, merge them into one edit instead.",
    ),
)

DESCRIPTION = (
    "Edit a single file using exact text replacement. Every edits[].oldText must match a"
    " unique, non-overlapping region of the original file. If two changes affect the same"
    " block or nearby lines, merge them into one edit instead of emitting overlapping edits."
    " Do not include large unchanged regions just to connect distant changes."
)

WRITE_PARAMS = (
    Param("path", "string", "Path to the file to write (relative or absolute)"),
    Param("content", "string", "Content to write to the file"),
)

WRITE_DESCRIPTION = (
    "Write content to a file. Creates the file if it doesn't exist, overwrites if it does."
    " Automatically creates parent directories."
)

_QUOTES = str.maketrans(
    {
        **dict.fromkeys("\u2018\u2019\u201a\u201b", "'"),
        **dict.fromkeys("\u201c\u201d\u201e\u201f", '"'),
        **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
        **dict.fromkeys("\u00a0\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a", " "),
        **dict.fromkeys("\u202f\u205f\u3000", " "),
    }
)


def normalize_to_lf(text: str) -> str:
    """``\\r\\n`` and lone ``\\r`` as ``\\n``."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def loose(text: str) -> str:
    """``text`` in the plain form the looser match compares (see the module's docstring)."""
    lines = unicodedata.normalize("NFKC", text).split("\n")
    return "\n".join(line.rstrip() for line in lines).translate(_QUOTES)


@frozen
class Replacement:
    """``length`` characters at ``index`` become ``new_text`` (``edit`` is its edits' index)."""

    index: int
    length: int
    new_text: str
    edit: int = 0


def _find(content: str, old: str) -> tuple[int, int, bool]:
    """Where ``old`` is in ``content``: (index, length, loosely), index -1 if absent."""
    index = content.find(old)
    if index != -1:
        return index, len(old), False
    loose_old = loose(old)
    return loose(content).find(loose_old), len(loose_old), True


def _line_spans(text: str) -> list[tuple[int, int]]:
    """Each line's (start, end) in ``text``, its ``\\n`` included."""
    spans, start = [], 0
    for match in re.finditer(r"[^\n]*\n|[^\n]+", text):
        spans.append((start, start + len(match.group())))
        start += len(match.group())
    return spans


def _apply(content: str, replacements: Sequence[Replacement], offset: int = 0) -> str:
    for r in sorted(replacements, key=lambda r: r.index, reverse=True):
        at = r.index - offset
        content = content[:at] + r.new_text + content[at + r.length :]
    return content


def _widen(original: str, base: str, matched: Sequence[Replacement]) -> list[Replacement]:
    """Replacements found in the plain form ``base`` as whole-line replacements of
    ``original``: lines no replacement touches keep their original text."""
    old_lines, base_lines = _line_spans(original), _line_spans(base)
    if len(old_lines) != len(base_lines):
        msg = "Cannot preserve unchanged lines because the base content has a different line count."
        raise ToolError(msg)
    groups: list[tuple[int, int, list[Replacement]]] = []
    for r in sorted(matched, key=lambda r: r.index):
        first = next((i for i, (s, e) in enumerate(base_lines) if s <= r.index < e), -1)
        last = first
        while 0 <= last < len(base_lines) and base_lines[last][1] < r.index + r.length:
            last += 1
        if first == -1 or last >= len(base_lines):
            raise ToolError("Replacement range is outside the base content.")
        if groups and first < groups[-1][1]:
            start, end, members = groups[-1]
            groups[-1] = (start, max(end, last + 1), [*members, r])
        else:
            groups.append((first, last + 1, [r]))
    widened = []
    for start, end, members in groups:
        base_start, base_end = base_lines[start][0], base_lines[end - 1][1]
        original_start = old_lines[start][0]
        widened.append(
            Replacement(
                original_start,
                old_lines[end - 1][1] - original_start,
                _apply(base[base_start:base_end], members, base_start),
            )
        )
    return widened


def apply_edits(content: str, edits: Sequence[Mapping[str, str]], path: str) -> tuple[str, str]:
    """The file's text (``\\n`` endings) before and after ``edits`` (pi's
    ``applyEditsToNormalizedContent``); a ``ToolError`` in pi's words if one cannot apply."""
    many = len(edits) > 1
    pairs = [(normalize_to_lf(e["oldText"]), normalize_to_lf(e["newText"])) for e in edits]
    for i, (old, _) in enumerate(pairs):
        if not old:
            msg = f"edits[{i}].oldText must not be empty in {path}." if many else ""
            raise ToolError(msg or f"oldText must not be empty in {path}.")
    loosely = any(_find(content, old)[2] for old, _ in pairs)
    base = loose(content) if loosely else content
    matched = []
    for i, (old, new) in enumerate(pairs):
        index, length, _ = _find(base, old)
        if index == -1:
            raise ToolError(
                f"Could not find edits[{i}] in {path}. The oldText must match exactly including"
                " all whitespace and newlines."
                if many
                else f"Could not find the exact text in {path}. The old text must match exactly"
                " including all whitespace and newlines."
            )
        occurrences = loose(base).count(loose(old))
        if occurrences > 1:
            raise ToolError(
                f"Found {occurrences} occurrences of edits[{i}] in {path}. Each oldText must be"
                " unique. Please provide more context to make it unique."
                if many
                else f"Found {occurrences} occurrences of the text in {path}. The text must be"
                " unique. Please provide more context to make it unique."
            )
        matched.append(Replacement(index, length, new, i))
    matched.sort(key=lambda r: r.index)
    for before, after in itertools.pairwise(matched):
        if before.index + before.length > after.index:
            msg = (
                f"edits[{before.edit}] and edits[{after.edit}] overlap in {path}. Merge them"
                " into one edit or target disjoint regions."
            )
            raise ToolError(msg)
    replacements = _widen(content, base, matched) if loosely else matched
    new_content = _apply(content, replacements)
    if new_content == content:
        raise ToolError(
            f"No changes made to {path}. The replacements produced identical content."
            if many
            else f"No changes made to {path}. The replacement produced identical content. This"
            " might indicate an issue with special characters or the text not existing as"
            " expected."
        )
    return content, new_content


def _line_ending_at(content: str, offset: int) -> str:
    """The ending of the line holding ``offset`` (pi's ``getLineEndingAt``)."""
    feed = content.find("\n", offset)
    if feed == -1:
        feed = content.rfind("\n", 0, offset + 1)
    if feed == -1:
        return "\r" if "\r" in content else "\n"
    return "\r\n" if feed > 0 and content[feed - 1] == "\r" else "\n"


def keep_line_endings(original: str, new_lf: str) -> str:
    """``new_lf`` with the ``\\r\\n`` endings of ``original`` kept where its lines are.

    Simpler than pi's offset mapping and with the same result for a file of one kind
    of ending: the new text takes the ending the file uses.
    """
    if "\r" not in original:
        return new_lf
    ending = _line_ending_at(original, 0)
    return new_lf.replace("\n", ending)


def edit_file(path: Path, given: str, edits: Sequence[Mapping[str, str]]) -> str:
    """Apply ``edits`` to ``path``; pi's answer (blocking: run in a thread)."""
    try:
        raw = path.read_bytes().decode("utf-8", errors="replace")
        with path.open("r+b"):  # pi checks it may write before it reads
            pass
    except OSError as exc:
        code = errno.errorcode.get(exc.errno or 0, "EIO")
        raise ToolError(f"Could not edit file: {given}. Error code: {code}.") from exc
    bom = "\ufeff" if raw.startswith("\ufeff") else ""
    text = raw[len(bom) :]
    _, new_lf = apply_edits(normalize_to_lf(text), edits, given)
    path.write_bytes((bom + keep_line_endings(text, new_lf)).encode("utf-8"))
    return f"Successfully replaced {len(edits)} block(s) in {given}."


def edit_arguments(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments as pi's ``prepareArguments`` mends them: ``edits`` given as a JSON
    string or as one object, or a single ``oldText``/``newText`` at the top."""
    args = dict(arguments)
    edits = args.get("edits")
    if isinstance(edits, str):
        try:
            parsed = json.loads(edits)
        except ValueError:
            parsed = None
        if isinstance(parsed, list):
            args["edits"] = parsed
        elif _single(parsed):
            args["edits"] = [parsed]
    elif _single(edits):
        args["edits"] = [edits]
    if isinstance(args.get("oldText"), str) and isinstance(args.get("newText"), str):
        listed = list(args["edits"]) if isinstance(args.get("edits"), list) else []
        listed.append({"oldText": args.pop("oldText"), "newText": args.pop("newText")})
        args["edits"] = listed
    return args


def _single(value: object) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("oldText"), str)
        and isinstance(value.get("newText"), str)
    )


def edit_tool(cwd: Path) -> Tool:
    """pi's ``edit`` tool, its paths taken from ``cwd``."""

    async def execute(arguments: Mapping[str, Any]) -> str:
        args = edit_arguments(arguments)
        check_arguments("edit", PARAMS, args)
        if not args["edits"]:
            msg = "Edit tool input is invalid. edits must contain at least one replacement."
            raise ToolError(msg)
        path = resolve_path(args["path"], cwd)
        return await trio.to_thread.run_sync(edit_file, path, args["path"], args["edits"])

    return Tool(
        name="edit", execute=execute, description=DESCRIPTION, parameters=parameters_schema(PARAMS)
    )


def write_file(path: Path, given: str, content: str) -> str:
    """Write ``content`` to ``path``, parents made as needed (blocking: run in a thread)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
    except OSError as exc:
        raise ToolError(os_error_text(exc, "open", path)) from exc
    return f"Successfully wrote to {given}"


def write_tool(cwd: Path) -> Tool:
    """pi's ``write`` tool, its paths taken from ``cwd``."""

    async def execute(arguments: Mapping[str, Any]) -> str:
        check_arguments("write", WRITE_PARAMS, arguments)
        path = resolve_path(arguments["path"], cwd)
        return await trio.to_thread.run_sync(
            write_file, path, arguments["path"], arguments["content"]
        )

    return Tool(
        name="write",
        execute=execute,
        description=WRITE_DESCRIPTION,
        parameters=parameters_schema(WRITE_PARAMS),
    )
