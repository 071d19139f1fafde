"""Ctrl+G: the message being written, edited in ``$VISUAL`` or ``$EDITOR``.

The text goes into a file of its own (0600, in a 0700 directory made for it),
the editor runs on the terminal, and what the file holds when it exits is the new
text (without the one newline editors add at the end). The directory is removed
afterwards, whatever happened.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

import trio


class EditorError(Exception):
    """The external editor could not be run, or failed; the text is kept as it was."""


def editor_command(environ: Mapping[str, str]) -> list[str]:
    """The editor to run: ``$VISUAL``, else ``$EDITOR``, split as a shell would.

    Args:
        environ: the environment (``os.environ``).

    Raises:
        EditorError: neither is set, or the one set is not a valid command line.
    """
    for name in ("VISUAL", "EDITOR"):
        value = environ.get(name, "").strip()
        if value:
            try:
                return shlex.split(value)
            except ValueError as exc:
                msg = f"${name} is not a command line ({exc}): {value!r}"
                raise EditorError(msg) from None
    msg = "set $VISUAL or $EDITOR to edit the message in an editor"
    raise EditorError(msg)


async def edit_text(text: str, command: list[str]) -> str:
    """``text`` after ``command`` edited it in a file; it inherits the terminal.

    Args:
        text: the text to start from.
        command: the editor and its arguments; the file's path is added last.

    Raises:
        EditorError: the editor cannot be started or exits with a failure.
    """
    directory = Path(tempfile.mkdtemp(prefix="trio-session-edit-"))  # 0700
    try:
        path = directory / "message.md"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        try:
            done = await trio.run_process([*command, str(path)], check=False)
        except OSError as exc:
            msg = f"cannot run {command[0]}: {exc.strerror or exc}"
            raise EditorError(msg) from None
        if done.returncode != 0:
            msg = f"{command[0]} exited with status {done.returncode}; the message is unchanged"
            raise EditorError(msg)
        edited = path.read_text(encoding="utf-8", errors="replace")
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return edited[:-1] if edited.endswith("\n") else edited
