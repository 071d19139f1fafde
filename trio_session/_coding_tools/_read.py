"""``read``: a file's lines, from ``offset`` for ``limit`` lines, within pi's limits.

As pi 1.6.0's read tool for a text file: the file is decoded as UTF-8 (bytes that are
not UTF-8, as in a binary file, become U+FFFD), split on ``\\n``, and the lines asked
for are returned as they are — no line numbers — cut to the first 2000 lines or
50 KB. A cut result ends with a note giving the ``offset`` to go on from; a first
line too long for 50 KB alone is not shown, the note points at ``sed`` instead.
An image (by its first bytes: JPEG, PNG, GIF, WebP, BMP) is answered as pi answers it,
``Read image file [image/png]`` and the image (``_image``); ``offset`` and ``limit``
do not apply to it.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import trio

from .._agent.tools import Tool
from .._core.errors import ToolError
from .._core.events import ToolOutput
from ._common import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_LINES,
    Param,
    check_arguments,
    format_size,
    js_number,
    parameters_schema,
    resolve_path,
    truncate_head,
)
from ._image import SNIFF_BYTES, image_type, read_image

PARAMS = (
    Param("path", "string", "Path to the file to read (relative or absolute)"),
    Param("offset", "number", "Line number to start reading from (1-indexed)", required=False),
    Param("limit", "number", "Maximum number of lines to read", required=False),
)

DESCRIPTION = (
    "Read the contents of a file. Supports text files and images (jpg, png, gif, webp, bmp)."
    " Images are sent as attachments. For text files, output is truncated to"
    f" {DEFAULT_MAX_LINES} lines or {DEFAULT_MAX_BYTES // 1024}KB (whichever is hit first)."
    " Use offset/limit for large files. When you need the full file, continue with offset"
    " until complete."
)


def os_error_text(exc: OSError, action: str, path: Path) -> str:
    """An ``OSError`` as node words it (pi's tools pass node's message on):
    ``ENOENT: no such file or directory, access '/w/app.py'``."""
    code = errno.errorcode.get(exc.errno or 0, "EIO")
    reason = (exc.strerror or str(exc)).lower()
    return f"{code}: {reason}, {action} '{path}'"


def read_file(
    path: Path, given: str, offset: float | None, limit: float | None
) -> str | ToolOutput:
    """What ``read`` answers for ``path`` (``given`` as the model wrote it; blocking: run
    in a thread): an image's note and the image, or the text."""
    if not os.access(path, os.R_OK):
        code = errno.ENOENT if not path.exists() else errno.EACCES
        raise ToolError(os_error_text(OSError(code, os.strerror(code)), "access", path))
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ToolError(os_error_text(exc, "read", path)) from exc
    mime_type = image_type(data[:SNIFF_BYTES])
    if mime_type is not None:
        return ToolOutput(read_image(data, mime_type).content)
    return read_text(data, given, offset, limit)


def read_text(data: bytes, given: str, offset: float | None, limit: float | None) -> str:
    """What ``read`` answers for a text file's bytes (``given``: its path as the model
    wrote it)."""
    lines = data.decode("utf-8", errors="replace").split("\n")
    start = max(0, int(offset) - 1) if offset else 0
    if start >= len(lines):
        assert offset is not None
        msg = f"Offset {js_number(offset)} is beyond end of file ({len(lines)} lines total)"
        raise ToolError(msg)
    end = len(lines) if limit is None else min(start + max(0, int(limit)), len(lines))
    head = truncate_head("\n".join(lines[start:end]))
    first = start + 1
    if head.first_line_too_long:
        size = format_size(len(lines[start].encode("utf-8")))
        return (
            f"[Line {first} is {size}, exceeds {format_size(DEFAULT_MAX_BYTES)} limit."
            f" Use bash: sed -n '{first}p' {given} | head -c {DEFAULT_MAX_BYTES}]"
        )
    if head.truncated:
        last = first + head.output_lines - 1
        limit_note = "" if head.by_lines else f" ({format_size(DEFAULT_MAX_BYTES)} limit)"
        return (
            f"{head.content}\n\n[Showing lines {first}-{last} of {len(lines)}{limit_note}."
            f" Use offset={last + 1} to continue.]"
        )
    if limit is not None and end < len(lines):
        return (
            f"{head.content}\n\n[{len(lines) - end} more lines in file."
            f" Use offset={end + 1} to continue.]"
        )
    return head.content


def read_tool(cwd: Path) -> Tool:
    """pi's ``read`` tool, its paths taken from ``cwd``."""

    async def execute(arguments: Mapping[str, Any]) -> str | ToolOutput:
        check_arguments("read", PARAMS, arguments)
        path = resolve_path(arguments["path"], cwd)
        return await trio.to_thread.run_sync(
            read_file,
            path,
            arguments["path"],
            arguments.get("offset"),
            arguments.get("limit"),
            abandon_on_cancel=True,
        )

    return Tool(
        name="read", execute=execute, description=DESCRIPTION, parameters=parameters_schema(PARAMS)
    )
