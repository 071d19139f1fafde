"""Fuzz (hypothesis): random and malformed lines among valid commands never break the server.

Each example is a batch of lines — valid commands with ids, objects that are nearly
commands, random bytes, invalid UTF-8, empty lines, lines over the length cap — sent
in one go. The server must answer every line exactly once, in order, echoing valid
ids; write only whole JSON lines; stay up; and run a valid prompt afterwards.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import attrs
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trio_session import FauxProvider, FauxReply, open_session
from trio_session.rpc import RpcServer
from trio_session.rpc._client import default_command

from .rpc_helpers import RawLines, write_json

#: The in-memory server's line cap: small, so that overlong lines cost little (and still
#: well above the longest line the other strategies make).
SMALL_CAP = 4096


@attrs.frozen
class Line:
    """One line to send and what its response must show.

    ``id`` is the id the response must echo (``None``: no id); ``ok`` whether it
    must succeed (``None``: either, as for a prompt that may find the session busy).
    """

    data: bytes
    id: str | int | None = None
    ok: bool | None = False
    command: str | None = None


ids = st.one_of(st.text(max_size=12), st.integers(min_value=-(2**53), max_value=2**53))
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=8,
)
VALID: dict[str, dict[str, Any]] = {
    "abort": {},
    "abort_retry": {},
    "retry_now": {},
    "get_state": {},
    "get_messages": {},
    "set_auto_retry": {"enabled": True},
    "set_auto_compaction": {"enabled": False},
    "prompt": {"message": "fuzz"},
    "new_session": {},
}


@st.composite
def valid_commands(draw: st.DrawFn) -> Line:
    """A valid command with an id (and maybe fields it does not know)."""
    kind = draw(st.sampled_from(sorted(VALID)))
    command_id = draw(ids)
    extra = draw(st.dictionaries(st.sampled_from(["x", "sessionId", "meta"]), json_values))
    obj = {"id": command_id, "type": kind, **VALID[kind], **extra}
    ok = None if kind == "prompt" else True
    return Line(json.dumps(obj).encode(), command_id, ok, kind)


@st.composite
def near_commands(draw: st.DrawFn) -> Line:
    """An object with a valid id that is not a valid command: bad type, bad fields."""
    command_id = draw(ids)
    broken = draw(
        st.sampled_from(["missing-type", "type-value", "unknown", "field-type", "missing-field"])
    )
    obj: dict[str, Any] = {"id": command_id}
    if broken == "type-value":
        obj["type"] = draw(json_values.filter(lambda v: not isinstance(v, str)))
    elif broken == "unknown":
        obj["type"] = draw(st.text(max_size=10).filter(lambda t: t not in VALID))
    elif broken == "field-type":
        kind = draw(st.sampled_from(["set_auto_retry", "set_auto_compaction", "prompt"]))
        key, right = ("message", str) if kind == "prompt" else ("enabled", bool)
        value = draw(json_values.filter(lambda v: v is not None and not isinstance(v, right)))
        obj.update({"type": kind, key: value})
    elif broken == "missing-field":
        obj["type"] = draw(st.sampled_from(["set_auto_retry", "set_auto_compaction", "prompt"]))
    return Line(json.dumps(obj).encode(), command_id, False)


def _no_newline(data: bytes) -> bytes:
    return data.replace(b"\n", b" ")


junk = st.one_of(
    st.binary(max_size=80).map(_no_newline),
    st.text(max_size=40).map(lambda t: _no_newline(t.encode("utf-8", "surrogatepass"))),
    json_values.filter(lambda v: not isinstance(v, dict)).map(lambda v: json.dumps(v).encode()),
    st.sampled_from([b"", b" ", b"\r", b"\t\t", b"{", b"}", b"null", b"\xc3\x28", b"\xed\xa0\x80"]),
).map(lambda data: Line(data, None, None))

overlong = st.integers(min_value=SMALL_CAP + 1, max_value=3 * SMALL_CAP).map(
    lambda n: Line(b"{" + b"a" * n, None, False, "parse")
)

lines = st.lists(
    st.one_of(valid_commands(), near_commands(), junk, overlong),
    min_size=1,
    max_size=80,
)


def check_transcript(batch: list[Line], output: list[bytes]) -> None:
    """Every output line is a whole JSON object; one response per input line, in order."""
    objs = [json.loads(raw) for raw in output]
    assert all(isinstance(o, dict) for o in objs)
    responses = [o for o in objs if o.get("type") == "response"]
    assert len(responses) == len(batch)
    for line, response in zip(batch, responses, strict=True):
        assert set(response) <= {"id", "type", "command", "success", "data", "error"}
        if line.id is not None:
            assert response["id"] == line.id
        elif line.ok is False:
            assert "id" not in response
        if line.ok is not None:
            assert response["success"] is line.ok, (line, response)
        if line.command is not None:
            assert response["command"] == line.command
        if response["success"] is False:
            assert isinstance(response["error"], str)
            assert response["error"]


async def run_batch(raw: RawLines, batch: list[Line], fence: str) -> list[bytes]:
    """Send every line, then a fence, while reading; return what came before the fence's
    answer. The fence is an ``abort``: it also waits out any prompt the batch started."""
    output: list[bytes] = []
    async with trio.open_nursery() as nursery:

        async def send() -> None:
            await raw.send(b"".join(line.data + b"\n" for line in batch))
            await raw.send({"id": fence, "type": "abort"})

        nursery.start_soon(send)
        while True:
            line = await raw.read_raw()
            assert line is not None, "the server's output ended"
            if json.loads(line).get("id") == fence:
                return output
            output.append(line)
    raise AssertionError("unreachable")  # pragma: no cover


async def then_a_prompt_works(raw: RawLines) -> None:
    """After the batch, a valid prompt runs to a good answer."""
    await raw.send({"id": "final", "type": "prompt", "message": "are you there?"})
    assert await raw.read() == {
        "id": "final",
        "type": "response",
        "command": "prompt",
        "success": True,
        "data": {"disposition": "started"},
    }
    while (obj := await raw.read())["type"] != "agent_end":
        pass
    assert obj["messages"][-1]["content"] == [{"type": "text", "text": "still here"}]
    assert obj["willRetry"] is False
    assert await raw.read() == {"type": "agent_settled", "aborted": False}


async def in_memory_fuzz(batch: list[Line]) -> None:
    provider = FauxProvider([])
    client_end, server_end = trio.testing.memory_stream_pair()
    server = RpcServer(lambda: open_session(provider), server_end, max_line_bytes=SMALL_CAP)
    raw = RawLines(client_end, client_end)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        output = await run_batch(raw, batch, "fence")
        check_transcript(batch, output)
        provider.extend([FauxReply(text="still here")])
        await then_a_prompt_works(raw)
        await client_end.send_eof()
        assert await raw.rest() == []


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=lines)
def test_fuzz_in_memory(batch: list[Line]) -> None:
    """R-42: any mix of lines: one response each, in order, ids echoed; the server lives on."""
    trio.run(in_memory_fuzz, batch, clock=trio.testing.MockClock(autojump_threshold=0))


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batch=st.lists(st.one_of(valid_commands(), near_commands(), junk), min_size=50, max_size=150)
)
def test_fuzz_real_process(tmp_path_factory: Any, batch: list[Line]) -> None:
    """R-42: the real process too: every line answered once, a 2 MB line among them."""
    batch = [*batch, Line(b"z" * (2 * 1024 * 1024), None, False, "parse")]
    replies = [{"text": "still here"}] * (len(batch) + 1)
    script = write_json(Path(tmp_path_factory.mktemp("fuzz")) / "script.json", replies)

    async def main() -> None:
        process = await trio.lowlevel.open_process(
            default_command("--faux", str(script)), stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert process.stdin is not None
        assert process.stdout is not None
        raw = RawLines(process.stdin, process.stdout)
        try:
            with trio.fail_after(60):
                check_transcript(batch, await run_batch(raw, batch, "fence"))
                await then_a_prompt_works(raw)
                await process.stdin.aclose()
                assert await raw.rest() == []
                assert await process.wait() == 0
        finally:
            if process.returncode is None:
                process.kill()
            await process.wait()

    trio.run(main)
