"""JSON faux scripts: the ``--faux SCRIPT.json`` format and its errors."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.wording import json_error
from trio_session import FauxProvider, FauxReply, ToolCall, Usage, open_session
from trio_session.providers._faux import (
    FauxScriptError,
    faux_script_from_json,
    load_faux_script,
)


def test_every_key_decodes(tmp_path: Path) -> None:
    """Each reply key maps to its FauxReply field."""
    path = tmp_path / "script.json"
    path.write_text(
        json.dumps(
            [
                {"error": "503 Service Unavailable", "delay": 0.5},
                {
                    "text": "Hello!",
                    "chunks": ["Hel", "lo!"],
                    "chunkDelay": 0.1,
                    "usage": {"input": 10, "output": 3, "cacheRead": 2, "cacheWrite": 1},
                },
                {"toolCalls": [{"id": "t1", "name": "read", "arguments": {"path": "a"}}]},
                {"text": "…", "hang": True},
                {"text": "cut", "stopReason": "length"},
            ]
        )
    )
    assert load_faux_script(path) == [
        FauxReply(error="503 Service Unavailable", delay=0.5),
        FauxReply(
            text="Hello!",
            chunks=("Hel", "lo!"),
            chunk_delay=0.1,
            usage=Usage(input=10, output=3, cache_read=2, cache_write=1),
        ),
        FauxReply(tool_calls=(ToolCall(id="t1", name="read", arguments={"path": "a"}),)),
        FauxReply(text="…", hang=True),
        FauxReply(text="cut", stop_reason="length"),
    ]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"text": "x"}, "faux script s.json must be a JSON array of replies, not dict"),
        (["x"], "faux script s.json: [0] must be an object, not str"),
        (
            [{}, {"txt": "x"}],
            "faux script s.json: [1].txt is not a reply key (known keys: text, chunks, "
            "toolCalls, error, delay, chunkDelay, usage, hang, stopReason)",
        ),
        ([{"text": 3}], "faux script s.json: [0].text must be a string, not 3"),
        (
            [{"delay": "1"}],
            "faux script s.json: [0].delay must be a non-negative number of seconds, not '1'",
        ),
        (
            [{"chunkDelay": -0.5}],
            "faux script s.json: [0].chunkDelay must be a non-negative number of seconds, not -0.5",
        ),
        ([{"hang": 1}], "faux script s.json: [0].hang must be a boolean, not 1"),
        (
            [{"usage": {"input": -1.5}}],
            "faux script s.json: [0].usage.input must be an integer, not -1.5",
        ),
        (
            [{"toolCalls": [{"name": "x"}]}],
            "faux script s.json: [0].toolCalls[0].id is missing",
        ),
        (
            [{"stopReason": "error"}],
            "faux script s.json: [0].stopReason must be one of 'stop', 'length', 'toolUse', "
            "not 'error' (script a failure with \"error\")",
        ),
        (
            [{"text": "ab", "chunks": ["a"]}],
            "faux script s.json: [0]: FauxReply chunks ('a',) do not join to text 'ab'",
        ),
    ],
)
def test_bad_scripts_name_reply_and_key(data: Any, message: str) -> None:
    """A bad script is one FauxScriptError naming the file, the reply and the key."""
    with pytest.raises(FauxScriptError, match=f"^{re.escape(message)}$"):
        faux_script_from_json(data, source="s.json")


def test_unreadable_and_invalid_files(tmp_path: Path) -> None:
    """A missing file or invalid JSON is a FauxScriptError naming the file."""
    missing = tmp_path / "missing.json"
    with pytest.raises(FauxScriptError, match=r"^cannot read faux script .*missing\.json: "):
        load_faux_script(missing)
    broken = tmp_path / "broken.json"
    broken.write_text('[{"text": "x"},]')
    with pytest.raises(
        FauxScriptError,
        match=rf"^faux script {re.escape(str(broken))} is not valid JSON: "
        + re.escape(json_error('[{"text": "x"},]'))
        + "$",
    ):
        load_faux_script(broken)


def test_from_json_constructors() -> None:
    """FauxReply.from_json and FauxProvider.from_json read one reply and a whole script."""
    assert FauxReply.from_json({"text": "hi"}) == FauxReply(text="hi")
    with pytest.raises(FauxScriptError, match=r"^reply\.hang must be a boolean, not 'no'$"):
        FauxReply.from_json({"hang": "no"})
    provider = FauxProvider.from_json([{"text": "a"}, {"text": "b"}], name="scripted")
    assert (provider.name, provider.remaining) == ("scripted", 2)


async def test_an_exhausted_json_script_ends_requests_with_an_error() -> None:
    """When the script runs out, a request ends with the "faux script exhausted" error."""
    async with open_session(FauxProvider.from_json([])) as session:
        reply = await session.prompt("anyone?")
    assert (reply.stop_reason, reply.error_message) == (
        "error",
        "faux script exhausted: no reply for request 1",
    )
