"""A session as one self-contained HTML page (the reference's ``export_html``).

``render_html`` is pure: it turns a session's messages into a page with its own
styles and no scripts, fonts, links or other outside resources. Every piece of text
from the conversation is HTML-escaped; an image is embedded as a ``data:`` URI only
when its MIME type is an image type and its data is plain base64, and is otherwise
shown as a note. ``write_html`` puts the page in a file, mode 0600 like the session
file it comes from (a conversation is private), in directories it creates 0700.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import uuid
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import trio

from ._core.messages import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    Message,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserContent,
    UserMessage,
)
from ._dirs import fsync_directory, make_private_dirs
from ._files import check_regular

_IMAGE_TYPE = re.compile(r"^image/[A-Za-z0-9.+-]+$")
_BASE64 = re.compile(r"^[A-Za-z0-9+/]*={0,2}$")

_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 52rem; margin: 2rem auto; padding: 0 1rem;
       color: #1d1d1f; background: #fafafa; line-height: 1.45; }
header { border-bottom: 1px solid #ddd; margin-bottom: 1.5rem; }
header dl { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; }
header dt { color: #666; }
.message { border-radius: 8px; padding: .6rem .9rem; margin: .8rem 0; background: #fff;
           border: 1px solid #e3e3e3; }
.role { font-size: .75rem; text-transform: uppercase; letter-spacing: .05em; color: #666; }
.user { border-left: 4px solid #2f6fdf; }
.assistant { border-left: 4px solid #2a9d62; }
.toolResult { border-left: 4px solid #b0812a; }
.bashExecution { border-left: 4px solid #6b4fbb; }
.summary, .custom { border-left: 4px solid #888; }
.failed { border-left: 4px solid #c0392b; }
.error { color: #c0392b; }
.thinking { color: #666; font-style: italic; }
pre { white-space: pre-wrap; word-break: break-word; background: #f3f3f3; padding: .5rem;
      border-radius: 4px; }
.text { white-space: pre-wrap; word-break: break-word; }
img { max-width: 100%; }
"""


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _time(ms: int) -> str:
    moment = datetime.fromtimestamp(ms / 1000, UTC)
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC"


def _text(text: str) -> str:
    return f'<div class="text">{_e(text)}</div>'


def _image(part: ImageContent) -> str:
    if _IMAGE_TYPE.match(part.mime_type) and _BASE64.match(part.data):
        return f'<img alt="image" src="data:{_e(part.mime_type)};base64,{part.data}">'
    return f'<p class="note">[image of type {_e(part.mime_type)} not shown]</p>'


def _user_parts(content: str | Sequence[UserContent]) -> str:
    if isinstance(content, str):
        return _text(content)
    out = []
    for part in content:
        out.append(_text(part.text) if isinstance(part, TextContent) else _image(part))
    return "".join(out)


def _assistant(message: AssistantMessage) -> str:
    out = []
    for part in message.content:
        if isinstance(part, TextContent):
            out.append(_text(part.text))
        elif isinstance(part, ThinkingContent):
            out.append(f'<div class="thinking text">{_e(part.thinking)}</div>')
        elif isinstance(part, ToolCall):
            arguments = json.dumps(part.arguments, indent=2, ensure_ascii=False)
            out.append(f"<p>Tool call <code>{_e(part.name)}</code></p><pre>{_e(arguments)}</pre>")
    if message.error_message:
        out.append(f'<p class="error">{_e(message.error_message)}</p>')
    elif message.stop_reason == "aborted":
        out.append('<p class="error">(aborted)</p>')
    return "".join(out)


def _bash(message: BashExecutionMessage) -> str:
    out = [f"<pre>$ {_e(message.command)}\n{_e(message.output)}</pre>"]
    if message.cancelled:
        out.append("<p>(command cancelled)</p>")
    elif message.exit_code not in (None, 0):
        out.append(f"<p>exit code {_e(message.exit_code)}</p>")
    if message.truncated and message.full_output_path:
        out.append(f"<p>Output truncated; full output in {_e(message.full_output_path)}</p>")
    return "".join(out)


def _message(message: Message) -> str:
    css: str = message.role
    if isinstance(message, UserMessage):
        label, body = "user", _user_parts(message.content)
    elif isinstance(message, AssistantMessage):
        label, body = f"assistant · {message.model or message.provider}", _assistant(message)
        if message.failed:
            css = "assistant failed"
    elif isinstance(message, ToolResultMessage):
        label = f"tool result · {message.tool_name}" + (" (error)" if message.is_error else "")
        body = _user_parts(message.content)
    elif isinstance(message, BashExecutionMessage):
        label, body = "bash", _bash(message)
    elif isinstance(message, CustomMessage):
        label, body = f"custom · {message.custom_type}", _user_parts(message.content)
        css = "custom"
    elif isinstance(message, (BranchSummaryMessage, CompactionSummaryMessage)):
        kind = "branch summary" if isinstance(message, BranchSummaryMessage) else "compaction"
        label, body, css = kind, _text(message.summary), "summary"
    else:  # pragma: no cover - every role is handled above
        return ""
    return (
        f'<section class="message {css}"><div class="role">{_e(label)} · '
        f"{_e(_time(message.timestamp))}</div>{body}</section>"
    )


def render_html(
    messages: Iterable[Message],
    *,
    session_id: str,
    model: str,
    system_prompt: str | None = None,
) -> str:
    """The page for a session: a header (id, model, system prompt), then every message."""
    rows = [
        f"<dt>Session</dt><dd>{_e(session_id)}</dd>",
        f"<dt>Model</dt><dd>{_e(model)}</dd>",
    ]
    if system_prompt:
        rows.append(f"<dt>System prompt</dt><dd><pre>{_e(system_prompt)}</pre></dd>")
    body = "\n".join(_message(m) for m in messages)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>Session {_e(session_id)}</title><style>{_STYLE}</style></head>\n"
        f"<body><header><h1>Session</h1><dl>{''.join(rows)}</dl></header>\n"
        f"<main>\n{body}\n</main></body></html>\n"
    )


def default_export_path(session_id: str, session_file: Path | None) -> Path:
    """``trio-session-<name>.html`` in the current directory, where ``<name>`` is the
    session file's name without ``.jsonl`` (as the reference names it), else the id."""
    name = session_file.stem if session_file is not None else session_id
    return Path.cwd() / f"trio-session-{name}.html"


#: The mode of an exported page: it holds the conversation, as the session file does.
EXPORT_FILE_MODE = 0o600


async def write_html(path: Path, page: str) -> Path:
    """Write ``page`` to ``path``, mode 0600, atomically; return its absolute path.

    Missing parent directories are created, each 0700. An existing file at ``path``
    is replaced whole (through a temporary file and ``os.replace``), so it gets mode
    0600 too; a link is followed and the file it points to is replaced.

    Args:
        path: where the page goes.
        page: the HTML text.

    Raises:
        OSError: ``path`` is something other than a regular file (a named pipe, a
            directory: ``RefusedFileError``), or the file cannot be written.
    """
    target = Path(await trio.Path(path).absolute())
    await trio.to_thread.run_sync(_write_private, target, page.encode("utf-8"))
    return target


def _write_private(path: Path, data: bytes) -> None:
    """Replace ``path`` with a new 0600 file holding ``data`` (blocking, bounded)."""
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    check_regular(path)  # a pipe or a directory there is refused, not replaced
    make_private_dirs(path.parent)
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    flags = (
        os.O_WRONLY
        | os.O_CREAT
        | os.O_EXCL
        | getattr(os, "O_CLOEXEC", 0)
        | getattr(os, "O_BINARY", 0)
    )
    fd = os.open(temporary, flags, EXPORT_FILE_MODE)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    fsync_directory(path.parent)
