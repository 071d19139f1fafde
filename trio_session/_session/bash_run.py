"""Running a user's shell command for the session (the reference's RPC ``bash``).

``BashRun`` runs one command in a shell (``/bin/bash -c``, else ``bash`` on the
``PATH``, else ``sh``), in a new process group, with stdout and stderr merged, and
collects its output as the reference's ``bash-executor`` does:

- each chunk is decoded as UTF-8, ANSI escape sequences are stripped, control
  characters other than tab and newline are dropped, and carriage returns removed;
- only the last ``2 * DEFAULT_MAX_BYTES`` characters are kept in memory; once the
  command has printed more than ``DEFAULT_MAX_BYTES`` bytes, everything from then on
  (with what was still held) also goes to a temporary file, private to the user (0600);
- the result is the tail of the output: at most ``DEFAULT_MAX_LINES`` lines and
  ``DEFAULT_MAX_BYTES`` bytes (``truncate_tail``); when it was cut, ``truncated`` is
  true and ``full_output_path`` names the file with all of it.

Cancellation is structural: the run lives in its own ``trio.CancelScope``, which
``BashRun.abort`` cancels. The whole process group is then killed (SIGKILL, as the
reference does) and the result says ``cancelled`` with no exit code. A caller's own
cancellation kills the group too, and propagates.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

import attrs
import trio

from .._core.classes import define, frozen

#: Most lines a bash result keeps (the reference's ``DEFAULT_MAX_LINES``).
DEFAULT_MAX_LINES = 2000

#: Most bytes a bash result keeps (the reference's ``DEFAULT_MAX_BYTES``, 50 KB).
DEFAULT_MAX_BYTES = 50 * 1024

#: How long output is still read after the shell exits, for a background process that
#: inherited the pipe (the reference's ``EXIT_STDIO_GRACE_MS``).
EXIT_STDIO_GRACE = 0.1

_READ_SIZE = 65536

# The ``strip-ansi`` package's pattern: CSI and OSC sequences, 7- and 8-bit.
_ANSI = re.compile(
    "[\u001b\u009b][\\[\\]()#;?]*(?:(?:(?:(?:;[-a-zA-Z\\d/#&.:=?%@~_]+)*"
    "|[a-zA-Z\\d]+(?:;[-a-zA-Z\\d/#&.:=?%@~_]*)*)?\u0007)"
    "|(?:(?:\\d{1,4}(?:;\\d{0,4})*)?[\\dA-PR-TZcf-nq-uy=><~]))"
)
# Control characters except tab and newline (carriage returns go too), and the
# interlinear-annotation format characters U+FFF9…U+FFFB.
_UNPRINTABLE = re.compile("[\u0000-\u0008\u000b-\u001f\ufff9-\ufffb]")


@frozen
class BashResult:
    """What a shell command did (the reference's ``BashResult``).

    Attributes:
        output: what it printed (stdout and stderr merged), sanitised; only the tail
            when ``truncated``.
        exit_code: its exit status; ``None`` when it was cancelled or killed by a signal.
        cancelled: ``abort_bash`` stopped it.
        truncated: ``output`` is the tail of a longer output.
        full_output_path: the file with the whole output, when it was long.
    """

    output: str
    exit_code: int | None
    cancelled: bool = False
    truncated: bool = False
    full_output_path: str | None = None


def sanitize(text: str) -> str:
    """``text`` without ANSI escapes, control characters (but tab and newline) or ``\\r``."""
    return _UNPRINTABLE.sub("", _ANSI.sub("", text))


def _tail_bytes(line: str, max_bytes: int) -> str:
    """The end of ``line`` in at most ``max_bytes`` UTF-8 bytes, on a character boundary."""
    data = line.encode("utf-8")
    if len(data) <= max_bytes:
        return line
    start = len(data) - max_bytes
    while start < len(data) and data[start] & 0xC0 == 0x80:
        start += 1
    return data[start:].decode("utf-8")


def truncate_tail(
    content: str, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES
) -> tuple[str, bool]:
    """The last whole lines of ``content`` within both limits, and whether it was cut.

    The reference's ``truncateTail``: lines are taken from the end while the line
    count and the UTF-8 size allow; if even the last line is too big, its end is kept.
    """
    total = len(content.encode("utf-8"))
    lines = content.split("\n")
    if len(lines) <= max_lines and total <= max_bytes:
        return content, False
    kept: list[str] = []
    size = 0
    for line in reversed(lines):
        if len(kept) >= max_lines:
            break
        line_bytes = len(line.encode("utf-8")) + (1 if kept else 0)
        if size + line_bytes > max_bytes:
            if not kept:
                kept.append(_tail_bytes(line, max_bytes))
            break
        kept.append(line)
        size += line_bytes
    return "\n".join(reversed(kept)), True


def shell_command() -> list[str]:
    """The shell and its argument before the command, as the reference picks it."""
    if Path("/bin/bash").exists():
        return ["/bin/bash", "-c"]
    found = shutil.which("bash")
    return [found, "-c"] if found else ["sh", "-c"]


@define(eq=False)
class _Output:
    """The reference's output collector: a rolling tail, and a file once it is long."""

    _chunks: list[str] = attrs.field(factory=list)
    _held: int = 0
    _total_bytes: int = 0
    _decoder: codecs.IncrementalDecoder = attrs.field(
        factory=lambda: codecs.getincrementaldecoder("utf-8")("replace")
    )
    _file: IO[str] | None = None
    path: str | None = None

    def feed(self, data: bytes | bytearray, *, final: bool = False) -> str:
        self._total_bytes += len(data)
        text = sanitize(self._decoder.decode(data, final))
        if self._total_bytes > DEFAULT_MAX_BYTES:
            self._ensure_file()
        if self._file is not None:
            self._file.write(text)
        self._chunks.append(text)
        self._held += len(text)
        while self._held > 2 * DEFAULT_MAX_BYTES and len(self._chunks) > 1:
            self._held -= len(self._chunks.pop(0))
        return text

    def _ensure_file(self) -> None:
        if self._file is not None:
            return
        fd, self.path = tempfile.mkstemp(prefix="trio-session-bash-", suffix=".log")  # 0600
        self._file = os.fdopen(fd, "w", encoding="utf-8", errors="replace")
        for chunk in self._chunks:
            self._file.write(chunk)

    def result(self, exit_code: int | None, *, cancelled: bool) -> BashResult:
        self.feed(b"", final=True)
        output, truncated = truncate_tail("".join(self._chunks))
        if truncated:
            self._ensure_file()
        if self._file is not None:
            self._file.close()
        return BashResult(
            output=output,
            exit_code=None if cancelled else exit_code,
            cancelled=cancelled,
            truncated=truncated,
            full_output_path=self.path,
        )


@define(eq=False)
class BashRun:
    """One shell command, run once by ``run``; ``abort`` cancels it from any task.

    Args:
        command: the shell command line.
        cwd: where it runs (the current directory if ``None``).
        shell: the shell and its arguments before the command (``shell_command()``).
        on_output: called with each piece of output as it comes (decoded, sanitized).
    """

    command: str
    cwd: str | Path | None = None
    shell: list[str] = attrs.field(factory=shell_command)
    on_output: Callable[[str], None] | None = None
    _scope: trio.CancelScope = attrs.field(factory=trio.CancelScope, init=False)

    def abort(self) -> None:
        """Cancel the run: the process group is killed and the result is ``cancelled``."""
        self._scope.cancel(reason="bash aborted")

    async def run(self) -> BashResult:
        """Run the command to its end (or ``abort``); return what it did.

        Raises:
            OSError: the shell could not be started (``cwd`` missing …).
        """
        output = _Output()
        process = await trio.lowlevel.open_process(
            [*self.shell, self.command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=self.cwd,
            start_new_session=True,
        )
        stdout = process.stdout
        assert stdout is not None
        try:
            with self._scope:
                async with trio.open_nursery() as nursery:
                    drained = trio.Event()

                    async def read() -> None:
                        while chunk := await stdout.receive_some(_READ_SIZE):
                            text = output.feed(chunk)
                            if text and self.on_output is not None:
                                self.on_output(text)
                        drained.set()

                    nursery.start_soon(read)
                    await process.wait()
                    # A background process may still hold the pipe: read a moment more.
                    with trio.move_on_after(EXIT_STDIO_GRACE):
                        await drained.wait()
                    nursery.cancel_scope.cancel(reason="bash command exited")
        finally:
            if process.returncode is None:
                _kill_group(process.pid)
                with trio.CancelScope(shield=True):
                    await process.wait()
            with trio.CancelScope(shield=True):
                await stdout.aclose()
        code = process.returncode
        return output.result(
            code if code is not None and code >= 0 else None,
            cancelled=self._scope.cancelled_caught,
        )


def _kill_group(pid: int) -> None:
    """SIGKILL the process group ``pid`` leads (the shell's), or just ``pid``."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        with contextlib.suppress(OSError):  # already gone
            os.kill(pid, signal.SIGKILL)
