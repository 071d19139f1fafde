"""``grep``, ``find`` and ``ls``: pi 1.6.0's opt-in tools, in Python.

pi runs ripgrep and fd (downloading them when missing); these walk the tree
themselves, with the same arguments, output lines, limits and messages:

- the walk includes hidden files, skips ``.git`` and ``node_modules`` and what the
  ``.gitignore`` files on the way list (plain patterns: ``name``, ``dir/``,
  ``/anchored``, ``*`` ``?`` ``**``, ``!`` re-including what an earlier line
  ignored — the last line that matches decides, and nothing below an ignored
  directory comes back, as in git);
- a glob without ``/`` (``*.py``) matches file names at any depth, one with ``/``
  (``src/**/*.py``) the path from the searched directory;
- ``grep`` answers ``path:line: text`` for a match and ``path-line- text`` for a
  context line, at most ``limit`` (100) matches, lines cut at 500 characters, files
  with a NUL byte skipped as binary; ``find`` the matching paths (``limit`` 1000),
  sorted, case-insensitive when the pattern has no capital; ``ls`` a directory's
  entries sorted case-insensitively, ``/`` after directories (``limit`` 500). Each
  output stops at 50 KB with pi's note.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import trio

from .._agent.tools import Tool
from .._core.errors import ToolError
from ._common import (
    DEFAULT_MAX_BYTES,
    Param,
    check_arguments,
    format_size,
    parameters_schema,
    resolve_path,
    truncate_head,
)

#: The longest line grep shows (pi's ``GREP_MAX_LINE_LENGTH``).
GREP_MAX_LINE_LENGTH = 500
_SKIPPED_DIRS = frozenset({".git", "node_modules"})
_GLOB_DESCRIPTION = (
    "Filter files by glob pattern relative to path, e.g. 'src/**/*.ts'. Without '/', e.g."
    " '*.ts', it matches file names at any depth"
)

GREP_PARAMS = (
    Param("pattern", "string", "Search pattern (regex or literal string)"),
    Param(
        "path",
        "string",
        "Directory or file to search (default: current directory)",
        required=False,
    ),
    Param("glob", "string", _GLOB_DESCRIPTION, required=False),
    Param("ignoreCase", "boolean", "Case-insensitive search (default: false)", required=False),
    Param(
        "literal",
        "boolean",
        "Treat pattern as literal string instead of regex (default: false)",
        required=False,
    ),
    Param(
        "context",
        "number",
        "Number of lines to show before and after each match (default: 0)",
        required=False,
    ),
    Param("limit", "number", "Maximum number of matches to return (default: 100)", required=False),
)
FIND_PARAMS = (
    Param(
        "pattern",
        "string",
        "Glob pattern relative to the search directory, e.g. 'src/**/*.ts'. Without '/', e.g."
        " '*.ts', it matches file names at any depth",
    ),
    Param("path", "string", "Directory to search in (default: current directory)", required=False),
    Param("limit", "number", "Maximum number of results (default: 1000)", required=False),
)
LS_PARAMS = (
    Param("path", "string", "Directory to list (default: current directory)", required=False),
    Param("limit", "number", "Maximum number of entries to return (default: 500)", required=False),
)
_LIMIT_NOTE = f"{format_size(DEFAULT_MAX_BYTES)} limit reached"


def glob_regex(pattern: str, *, ignore_case: bool = False) -> re.Pattern[str]:
    """A glob as a regular expression over ``/``-separated paths (``**`` crosses ``/``)."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[" and "]" in pattern[i + 1 :]:
            end = pattern.index("]", i + 1)
            body = pattern[i + 1 : end].replace("\\", "\\\\")
            out.append(f"[^{body[1:]}]" if body.startswith("!") else f"[{body}]")
            i = end
        elif c == "{" and "}" in pattern[i:]:
            end = pattern.index("}", i)
            choices = pattern[i + 1 : end].split(",")
            out.append("(?:" + "|".join(glob_regex(x).pattern[:-2] for x in choices) + ")")
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z", re.IGNORECASE if ignore_case else 0)


class _Glob:
    """A glob as pi's tools read it: without ``/`` it matches a name, else a path."""

    def __init__(self, pattern: str, *, ignore_case: bool = False) -> None:
        pattern = re.sub(r"^(?:\./)+", "", pattern)
        self._whole_path = "/" in pattern.rstrip("/")
        self._regex = glob_regex(pattern.strip("/"), ignore_case=ignore_case)

    def matches(self, relative: str) -> bool:
        subject = relative if self._whole_path else relative.rsplit("/", 1)[-1]
        return bool(self._regex.match(subject))


#: One ``.gitignore`` line: its directory (relative), its pattern, whether it is only
#: for directories, whether it is a ``!`` negation.
_Rule = tuple[str, re.Pattern[str], bool, bool]


def _ignore_rules(directory: Path, base: str) -> list[_Rule]:
    """The rules of ``directory``'s ``.gitignore`` (``base``: its relative path)."""
    try:
        text = (directory / ".gitignore").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    rules = []
    for line in text.splitlines():
        rule = line.strip()
        if not rule or rule.startswith("#"):
            continue
        negated = rule.startswith("!")
        rule = rule[1:] if negated or rule.startswith(("\\!", "\\#")) else rule
        dirs_only = rule.endswith("/")
        rule = rule.rstrip("/")
        if not rule:
            continue
        anchored = "/" in rule
        regex = glob_regex(rule.lstrip("/") if anchored else f"**/{rule}")
        rules.append((base, regex, dirs_only, negated))
    return rules


def _ignored(relative: str, is_dir: bool, rules: list[_Rule]) -> bool:
    """Whether the last rule that matches ``relative`` ignores it (a ``!`` one does not)."""
    ignored = False
    for base, regex, dirs_only, negated in rules:
        if dirs_only and not is_dir:
            continue
        if base and not relative.startswith(base + "/"):
            continue
        if regex.match(relative[len(base) + 1 :] if base else relative):
            ignored = not negated
    return ignored


def walk(root: Path) -> Iterator[tuple[str, bool]]:
    """Every path under ``root`` the search tools see: (relative path, is a directory), in
    sorted order, hidden ones included, ignored ones not."""
    rules = _ignore_rules(root, "")
    stack: list[tuple[Path, str]] = [(root, "")]
    while stack:
        directory, base = stack.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            continue
        below = []
        for entry in entries:
            relative = f"{base}/{entry.name}" if base else entry.name
            is_dir = entry.is_dir()
            if (is_dir and entry.name in _SKIPPED_DIRS) or _ignored(relative, is_dir, rules):
                continue
            yield relative, is_dir
            if is_dir and not entry.is_symlink():
                below.append((Path(entry.path), relative))
        for sub, relative in reversed(below):
            rules = rules + _ignore_rules(sub, relative)
            stack.append((sub, relative))


def _limit(value: Any, default: int) -> int:
    return max(1, int(value)) if value is not None else default


def _head_with_notes(lines: list[str], notes: list[str], after: Sequence[str] = ()) -> str:
    """The lines within 50 KB, then pi's notes in one bracket: ``notes``, the size note
    if the lines were cut, ``after``."""
    head = truncate_head("\n".join(lines), max_lines=2**53)
    notes = [*notes, *([_LIMIT_NOTE] if head.truncated else []), *after]
    return head.content + (f"\n\n[{'. '.join(notes)}]" if notes else "")


def _cut_line(line: str) -> tuple[str, bool]:
    if len(line) <= GREP_MAX_LINE_LENGTH:
        return line, False
    return f"{line[:GREP_MAX_LINE_LENGTH]}... [truncated]", True


def grep_text(cwd: Path, args: Mapping[str, Any]) -> str:
    """What ``grep`` answers (blocking: run in a thread)."""
    root = resolve_path(args.get("path") or ".", cwd)
    if not root.exists():
        raise ToolError(f"Path not found: {root}")
    pattern = re.escape(args["pattern"]) if args.get("literal") else args["pattern"]
    try:
        regex = re.compile(pattern, re.IGNORECASE if args.get("ignoreCase") else 0)
    except re.error as exc:
        raise ToolError(f"regex parse error: {exc}") from exc
    context = max(0, int(args.get("context") or 0))
    limit = _limit(args.get("limit"), 100)
    files_only = _Glob(args["glob"]) if args.get("glob") else None
    if root.is_dir():
        files = [
            (root / rel, rel)
            for rel, is_dir in walk(root)
            if not is_dir and (files_only is None or files_only.matches(rel))
        ]
    else:
        files = [(root, root.name)]
    out: list[str] = []
    matches, more, cut = 0, False, False
    for file, shown in files:
        try:
            data = file.read_bytes()
        except OSError:
            continue
        if b"\0" in data[:8192]:
            continue  # binary, as ripgrep skips it
        lines = data.decode("utf-8", errors="replace").split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        every = [i for i, line in enumerate(lines) if regex.search(line)]
        if not every:
            continue
        room = limit - matches
        if room <= 0:
            more = True
            break
        hits = set(every[:room])
        more = len(every) > room
        wanted = sorted({j for i in hits for j in range(i - context, i + context + 1)})
        for j in (j for j in wanted if 0 <= j < len(lines)):
            text, was_cut = _cut_line(lines[j].rstrip("\r"))
            cut = cut or was_cut
            sep = ":" if j in hits else "-"
            out.append(f"{shown}{sep}{j + 1}{sep} {text}")
        matches += len(hits)
        if more:
            break
    if not matches:
        return "No matches found"
    notes = []
    if more:
        notes.append(
            f"{limit} matches limit reached. Use limit={limit * 2} for more, or refine pattern"
        )
    cut_note = (
        f"Some lines truncated to {GREP_MAX_LINE_LENGTH} chars. Use read tool to see full lines"
    )
    return _head_with_notes(out, notes, [cut_note] if cut else [])


def find_text(cwd: Path, args: Mapping[str, Any]) -> str:
    """What ``find`` answers (blocking: run in a thread)."""
    root = resolve_path(args.get("path") or ".", cwd)
    if not root.exists():
        raise ToolError(f"Path not found: {root}")
    pattern: str = args["pattern"]
    glob = _Glob(pattern, ignore_case=pattern == pattern.lower())
    limit = _limit(args.get("limit"), 1000)
    found: list[str] = []
    more = False
    for relative, is_dir in walk(root):
        if glob.matches(relative):
            if len(found) == limit:
                more = True
                break
            found.append(f"{relative}/" if is_dir else relative)
    if not found:
        return "No files found matching pattern"
    notes = []
    if more:
        notes.append(
            f"{limit} results limit reached. Use limit={limit * 2} for more, or refine pattern"
        )
    return _head_with_notes(found, notes)


def ls_text(cwd: Path, args: Mapping[str, Any]) -> str:
    """What ``ls`` answers (blocking: run in a thread)."""
    directory = resolve_path(args.get("path") or ".", cwd)
    if not directory.exists():
        raise ToolError(f"Path not found: {directory}")
    if not directory.is_dir():
        raise ToolError(f"Not a directory: {directory}")
    limit = _limit(args.get("limit"), 500)
    try:
        names = sorted(os.listdir(directory), key=str.lower)
    except OSError as exc:
        raise ToolError(f"Cannot read directory: {exc.strerror or exc}") from exc
    entries: list[str] = []
    more = False
    for name in names:
        if len(entries) >= limit:
            more = True
            break
        try:
            entries.append(name + ("/" if (directory / name).is_dir() else ""))
        except OSError:
            continue
    if not entries:
        return "(empty directory)"
    notes = [f"{limit} entries limit reached. Use limit={limit * 2} for more"] if more else []
    return _head_with_notes(entries, notes)


def _tool(name: str, description: str, params: tuple[Param, ...], cwd: Path, run: Any) -> Tool:
    async def execute(arguments: Mapping[str, Any]) -> str:
        check_arguments(name, params, arguments)
        text: str = await trio.to_thread.run_sync(run, cwd, arguments, abandon_on_cancel=True)
        return text

    return Tool(
        name=name, execute=execute, description=description, parameters=parameters_schema(params)
    )


def grep_tool(cwd: Path) -> Tool:
    """pi's ``grep`` tool, searching from ``cwd``."""
    description = (
        "Search file contents for a pattern. Returns matching lines with file paths and line"
        " numbers. Respects .gitignore. Output is truncated to 100 matches or"
        f" {DEFAULT_MAX_BYTES // 1024}KB (whichever is hit first). Long lines are truncated to"
        f" {GREP_MAX_LINE_LENGTH} chars."
    )
    return _tool("grep", description, GREP_PARAMS, cwd, grep_text)


def find_tool(cwd: Path) -> Tool:
    """pi's ``find`` tool, searching from ``cwd``."""
    description = (
        "Search for files by glob pattern. Returns matching file paths relative to the search"
        " directory. Respects .gitignore. Output is truncated to 1000 results or"
        f" {DEFAULT_MAX_BYTES // 1024}KB (whichever is hit first)."
    )
    return _tool("find", description, FIND_PARAMS, cwd, find_text)


def ls_tool(cwd: Path) -> Tool:
    """pi's ``ls`` tool, listing from ``cwd``."""
    description = (
        "List directory contents. Returns entries sorted alphabetically, with '/' suffix for"
        " directories. Includes dotfiles. Output is truncated to 500 entries or"
        f" {DEFAULT_MAX_BYTES // 1024}KB (whichever is hit first)."
    )
    return _tool("ls", description, LS_PARAMS, cwd, ls_text)
