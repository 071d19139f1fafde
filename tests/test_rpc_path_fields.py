"""A path over RPC that no file system takes is one error answer, not a traceback
(issue 39, F11).

A NUL in ``switch_session``'s ``sessionPath`` or ``export_html``'s ``outputPath`` raised
"ValueError: embedded null byte" inside the handler: the answer named the exception and
the server logged its traceback. A lone surrogate did the same with a UnicodeEncodeError.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import trio

from trio_session import FauxProvider
from trio_session.rpc import RpcCommandError

from .test_pi_session_format import file_sessions, rpc_client

EXPECTED = "a file path (a string without NUL characters or lone surrogates)"


@pytest.mark.parametrize(
    ("command", "field", "value", "shown"),
    [
        ("switch_session", "sessionPath", "s/a\0b.jsonl", '"s/a\\u0000b.jsonl"'),
        ("export_html", "outputPath", "page\0.html", '"page\\u0000.html"'),
        ("new_session", "parentSession", "/p\0.jsonl", '"/p\\u0000.jsonl"'),
        ("switch_session", "sessionPath", "\ud800.jsonl", '"\ud800.jsonl"'),
    ],
    ids=["switch-nul", "export-nul", "parent-nul", "switch-surrogate"],
)
async def test_a_path_no_file_system_takes_is_one_error(
    command: str,
    field: str,
    value: str,
    shown: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """F11: one error answer naming the field and the value; nothing logged; the session
    being served stays."""
    sessions = file_sessions(tmp_path / "sessions", FauxProvider([]))
    with trio.fail_after(30), caplog.at_level(logging.DEBUG, logger="trio_session"):
        async with rpc_client(sessions) as client:
            before = (await client.get_state())["sessionFile"]
            with pytest.raises(RpcCommandError) as caught:
                await client.request(command, **{field: value})
            assert (await client.get_state())["sessionFile"] == before
    assert (
        str(caught.value) == f"{command} failed: {command}.{field} must be {EXPECTED}, not {shown}"
    )
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
