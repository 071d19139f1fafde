"""A tool while it runs, as the chat's live region shows it (pi 1.6.0's bash row). Pure.

From ``tool_execution_start`` to its ``tool_execution_end`` the chat shows the call
and, as ``tool_execution_update`` events bring it, the output so far: its last
``PREVIEW_LINES`` rows (wrapped to the width) under a line saying how many earlier
rows there are — all of them with Ctrl+O, as for finished results — and how long the
tool has run:

```text
  $ make test
    … (12 earlier lines, ctrl+o to expand)
    cc -c a.c
    cc -c b.c
    …
    Elapsed 3.2s
```

``bash`` shows its call as ``$ command`` (with `` (timeout Ns)``), as pi does; another
tool as ``→ name(arguments)``. When the tool ends, its result goes into the transcript
(collapsed there as every result is) and this view is gone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

from .._core.classes import define
from ._render import Style, fit, wrap

INDENT = "  "
#: Rows of output shown while results are collapsed (pi's ``BASH_PREVIEW_LINES``).
PREVIEW_LINES = 5
EXPAND_HINT = "ctrl+o to expand"


def _styled(text: str, sgr: str, style: Style) -> str:
    return f"\x1b[{sgr}m{text}\x1b[0m" if style.color else text


def format_duration(seconds: float) -> str:
    """pi's ``formatToolDuration``: ``4.2s`` under a minute, then ``3m 5s``, ``1h 2m 5s``."""
    if seconds < 60:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    minutes, rest = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m {rest}s"
    return f"{minutes // 60}h {minutes % 60}m {rest}s"


def _call_line(name: str, arguments: Mapping[str, Any]) -> str:
    if name == "bash":
        command = arguments.get("command")
        line = f"$ {command if isinstance(command, str) else '...'}"
        timeout = arguments.get("timeout")
        return f"{line} (timeout {timeout}s)" if timeout else line
    text = json.dumps(dict(arguments), ensure_ascii=False)
    return f"→ {name}({text[1:-1] if len(text) <= 200 else text[1:197] + '…'})"


@define(eq=False)
class RunningTool:
    """One tool call while it runs: what it was asked, and its output so far.

    Attributes:
        name: the tool's name.
        arguments: the call's arguments.
        started: when it started (seconds, the chat's clock).
        output: the text of its latest ``tool_execution_update``.
    """

    name: str
    arguments: Mapping[str, Any]
    started: float
    output: str = attrs.field(default="")

    def render(self, width: int, now: float, *, expanded: bool, style: Style) -> list[str]:
        """The call, the output's last rows (all when ``expanded``), the time it has run."""
        inner = max(width - 2 * len(INDENT), 8)
        call = [INDENT + _styled(row, "1;33", style) for row in wrap(self._call(), inner)]
        text = self.output.strip("\n")
        rows = wrap(text, inner) if text.strip() else []
        hidden = 0 if expanded else max(len(rows) - PREVIEW_LINES, 0)
        lines = list(call)
        if hidden:
            more = f"… ({hidden} earlier line{'s' if hidden != 1 else ''}, {EXPAND_HINT})"
            lines.append(INDENT * 2 + _styled(more, "2", style))
        lines += [INDENT * 2 + _styled(row, "2", style) if row else "" for row in rows[hidden:]]
        elapsed = f"Elapsed {format_duration(max(now - self.started, 0.0))}"
        lines.append(INDENT * 2 + _styled(elapsed, "2", style))
        return [fit(line, width) for line in lines]

    def _call(self) -> str:
        return _call_line(self.name, self.arguments)
