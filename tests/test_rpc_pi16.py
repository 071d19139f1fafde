"""pi 1.6.0's additions to the protocol (R-54): agent_settled, dispositions, clear_queue,
get_available_thinking_levels, get_entries, get_tree and bash_execution_update."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import trio
import trio.testing

from trio_session import (
    AgentSession,
    AgentSettled,
    FauxProvider,
    FauxReply,
    Model,
    SessionEvent,
    open_session,
)
from trio_session.rpc import RpcServer, connect_rpc

from .conftest import err, ok
from .rpc_helpers import JSON, RawLines

THINKER = Model(id="thinker", provider="faux", reasoning=True, context_window=1000)
PLAIN = Model(id="plain", provider="faux")

# -- agent_settled: once per prompt, after its last agent_end, at exact virtual times --------


@asynccontextmanager
async def recorded(
    script: list[FauxReply],
) -> AsyncIterator[tuple[AgentSession, list[tuple[float, str]], list[SessionEvent]]]:
    """A faux session whose events are recorded as ``(virtual time, type)``, and whole."""
    async with open_session(FauxProvider(script)) as session:
        told: list[tuple[float, str]] = []
        events: list[SessionEvent] = []

        def record(event: SessionEvent) -> None:
            told.append((trio.current_time(), event.type))
            events.append(event)

        session.subscribe(record)
        yield session, told, events


ANSWER = ["message_start", "message_update", "message_update", "message_update", "message_end"]
FAILED = ["message_start", "message_end", "turn_end", "agent_end"]


async def test_agent_settled_after_a_plain_run(autojump_clock: trio.testing.MockClock) -> None:
    """R-54: a plain run ends agent_end, then agent_settled {aborted: false}, once."""
    async with recorded([ok("hi", delay=1)]) as (session, told, events):
        await session.prompt("hello")
    assert [kind for _, kind in told] == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        *ANSWER,
        "turn_end",
        "agent_end",
        "agent_settled",
    ]
    assert told[-1] == (1.0, "agent_settled")
    assert events[-1] == AgentSettled(aborted=False)


async def test_agent_settled_after_two_503_retries(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-54: three runs (two 503s, then the answer) settle once, after the last agent_end,
    when the chain has ended: not at the willRetry agent_ends."""
    async with recorded([err(), err(), ok()]) as (session, told, events):
        await session.prompt("hello")
    assert [kind for _, kind in told] == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        *FAILED,
        "auto_retry_start",
        "agent_start",
        "turn_start",
        *FAILED,
        "auto_retry_start",
        "agent_start",
        "turn_start",
        *ANSWER,
        "auto_retry_end",
        "turn_end",
        "agent_end",
        "agent_settled",
    ]
    assert told[-1] == (6.0, "agent_settled")  # 2 s, then 4 s of backoff
    assert events[-1] == AgentSettled(aborted=False)


async def test_agent_settled_aborted_in_backoff(autojump_clock: trio.testing.MockClock) -> None:
    """R-54, R-30: abort() in the backoff: the chain's end, then agent_settled {aborted:
    true}, both before abort() returns."""
    async with recorded([err(), ok()]) as (session, told, events), trio.open_nursery() as nursery:
        nursery.start_soon(session.prompt, "hello")
        await trio.sleep(1)
        await session.abort()
        assert told[-2:] == [(1.0, "auto_retry_end"), (1.0, "agent_settled")]
    assert [kind for _, kind in told] == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        *FAILED,
        "auto_retry_start",
        "auto_retry_end",
        "agent_settled",
    ]
    assert events[-1] == AgentSettled(aborted=True)


async def test_agent_settled_after_a_queued_follow_up(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-54, R-36a: a follow-up queued while the answer streams continues the run; one
    agent_end and one agent_settled close both turns."""
    script = [ok("a", delay=1), ok("b")]
    async with recorded(script) as (session, told, events), trio.open_nursery() as nursery:
        nursery.start_soon(session.prompt, "hello")
        await trio.sleep(0.5)
        session.follow_up("more")
    assert [kind for _, kind in told] == [
        "agent_start",
        "turn_start",
        "message_start",
        "message_end",
        "queue_update",
        *ANSWER,
        "turn_end",
        "turn_start",
        "queue_update",
        "message_start",  # the follow-up
        "message_end",
        *ANSWER,
        "turn_end",
        "agent_end",
        "agent_settled",
    ]
    assert told[-1] == (1.0, "agent_settled")
    assert events[-1] == AgentSettled(aborted=False)


# -- over RPC ----------------------------------------------------------------------------


@asynccontextmanager
async def served(
    script: list[FauxReply], history: Path | None = None, model: Model = THINKER
) -> AsyncIterator[tuple[RawLines, RpcServer]]:
    """An RpcServer over an in-memory stream, serving a faux session (with a file if
    ``history`` is given); end of input on the way out."""
    client_end, server_end = trio.testing.memory_stream_pair()
    provider = FauxProvider(script)

    def sessions() -> Any:
        return open_session(provider, model, history=history)

    server = RpcServer(sessions, server_end)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        yield RawLines(client_end, client_end), server
        await client_end.send_eof()


def answer(command: str, data: Any = ..., id: int | str = 1) -> JSON:
    """A success response (``data`` left out when not given)."""
    out: JSON = {"id": id, "type": "response", "command": command, "success": True}
    if data is not ...:
        out["data"] = data
    return out


async def read_until(raw: RawLines, kind: str) -> list[JSON]:
    """Every line up to and including the first of type ``kind``."""
    lines = [await raw.read()]
    while lines[-1]["type"] != kind:
        lines.append(await raw.read())
    return lines


async def test_dispositions(autojump_clock: trio.testing.MockClock) -> None:
    """R-54, R-55: a prompt that starts a run is "started"; one queued by streamingBehavior,
    a steer and a follow_up are "queued"; a prompt during a backoff joins the re-attempt
    and is "queued" too: one run, one agent_settled, the joined text in its request."""
    script = [err(), ok("both", delay=1), ok("after f"), ok("after p")]
    async with served(script) as (raw, server):
        await raw.send({"id": 1, "type": "prompt", "message": "first"})
        assert await raw.read() == answer("prompt", {"disposition": "started"})
        await read_until(raw, "auto_retry_start")
        await raw.send({"id": 2, "type": "prompt", "message": "joined"})
        assert await raw.read() == answer("prompt", {"disposition": "queued"}, id=2)
        await raw.send({"id": 3, "type": "steer", "message": "s"})
        await raw.send({"id": 4, "type": "follow_up", "message": "f"})
        await raw.send({"id": 5, "type": "prompt", "message": "p", "streamingBehavior": "followUp"})
        lines = await read_until(raw, "agent_settled")
        responses = [o for o in lines if o["type"] == "response"]
        assert responses == [
            answer("steer", {"disposition": "queued"}, id=3),
            answer("follow_up", {"disposition": "queued"}, id=4),
            answer("prompt", {"disposition": "queued"}, id=5),
        ]
        assert [o["type"] for o in lines].count("agent_settled") == 1
        assert lines[-1] == {"type": "agent_settled", "aborted": False}
        requests = server.session.messages
    texts = [m.text for m in requests if m.role == "user"]
    assert texts == ["first", "joined", "s", "f", "p"]


async def test_clear_queue(autojump_clock: trio.testing.MockClock) -> None:
    """R-54: clear_queue takes every queued message back, as text, and empties the queues."""
    async with served([]) as (raw, server):
        for command, text in (("steer", "s1"), ("follow_up", "f1"), ("steer", "s2")):
            await raw.send({"id": 1, "type": command, "message": text})
            lines = [await raw.read(), await raw.read()]  # queue_update, then the answer
            assert [o["type"] for o in lines] == ["queue_update", "response"]
        await raw.send({"id": 2, "type": "clear_queue"})
        update, response = await raw.read(), await raw.read()
        assert update == {"type": "queue_update", "steering": [], "followUp": []}
        assert response == answer("clear_queue", {"steering": ["s1", "s2"], "followUp": ["f1"]}, 2)
        await raw.send({"id": 3, "type": "clear_queue"})
        assert await read_until(raw, "response") == [
            update,
            answer("clear_queue", {"steering": [], "followUp": []}, id=3),
        ]
        assert server.session.pending_message_count == 0


async def test_get_available_thinking_levels() -> None:
    """R-54: the levels the model supports; ``["off"]`` for a model without reasoning."""
    async with served([]) as (raw, _):
        await raw.send({"id": 1, "type": "get_available_thinking_levels"})
        levels = ["off", "minimal", "low", "medium", "high"]
        assert await raw.read() == answer("get_available_thinking_levels", {"levels": levels})
    async with served([], model=PLAIN) as (raw, _):
        await raw.send({"id": 1, "type": "get_available_thinking_levels"})
        assert await raw.read() == answer("get_available_thinking_levels", {"levels": ["off"]})


async def test_get_entries_and_get_tree(tmp_path: Path) -> None:
    """R-54: get_entries gives the file's entries in order (after ``since`` when given; an
    unknown one is an error); get_tree nests them by parentId, with labels."""
    path = tmp_path / "s.jsonl"
    async with served([ok("one"), ok("two")], history=path) as (raw, server):
        for text in ("a", "b"):
            await raw.send({"id": 0, "type": "prompt", "message": text})
            await read_until(raw, "agent_settled")
        file = server.session.history_file
        assert file is not None
        await raw.send({"id": 1, "type": "get_entries"})
        data = (await raw.read())["data"]
        entries = data["entries"]
        roles = [(e["type"], e["message"]["role"]) for e in entries if e["type"] == "message"]
        assert roles == [("message", r) for r in ("user", "assistant", "user", "assistant")]
        assert [e["parentId"] for e in entries] == [None] + [e["id"] for e in entries[:-1]]
        assert data["leafId"] == entries[-1]["id"] == file.leaf_id
        first = entries[1]["id"]
        await raw.send({"id": 2, "type": "get_entries", "since": entries[1]["id"]})
        assert await raw.read() == answer(
            "get_entries", {"entries": entries[2:], "leafId": data["leafId"]}, id=2
        )
        await raw.send({"id": 3, "type": "get_entries", "since": "nope"})
        assert await raw.read() == {
            "id": 3,
            "type": "response",
            "command": "get_entries",
            "success": False,
            "error": "Entry not found: nope",
        }
        file.append_label_nowait(first, "start")
        await raw.send({"id": 4, "type": "get_tree"})
        tree = (await raw.read())["data"]
    (root,) = tree["tree"]
    chain = [root]
    while chain[-1]["children"]:
        (child,) = chain[-1]["children"]
        chain.append(child)
    assert [n["entry"] for n in chain[:-1]] == entries  # one branch, in order
    label = chain[-1]["entry"]
    assert (label["type"], label["id"], label["targetId"]) == ("label", tree["leafId"], first)
    labelled = [n for n in chain if "label" in n]
    assert labelled == [{**chain[1], "label": "start", "labelTimestamp": label["timestamp"]}]
    assert labelled[0]["entry"]["id"] == first


async def test_get_entries_without_a_session_file() -> None:
    """A session without a file has no entries to give: one clear error each."""
    async with served([]) as (raw, _):
        for command in ("get_entries", "get_tree"):
            await raw.send({"id": 1, "type": command})
            assert await raw.read() == {
                "id": 1,
                "type": "response",
                "command": command,
                "success": False,
                "error": f"Cannot {command}: this session keeps no session file",
            }


async def test_bash_execution_updates_stream_the_output() -> None:
    """R-54: each piece of a running bash command's output comes as bash_execution_update
    with the command's id (none without one), before the answer; together they are the
    whole output."""
    command = "printf 'one\\n'; sleep 0.2; printf 'two\\n'"
    async with served([]) as (raw, _):
        await raw.send({"id": "b1", "type": "bash", "command": command})
        lines = await read_until(raw, "response")
        await raw.send({"type": "bash", "command": "echo plain"})
        plain = await read_until(raw, "response")
    updates, response = lines[:-1], lines[-1]
    assert [u["delta"] for u in updates] == ["one\n", "two\n"]
    assert all(list(u) == ["type", "id", "delta"] and u["id"] == "b1" for u in updates)
    assert response["data"]["output"] == "one\ntwo\n"
    assert plain[0] == {"type": "bash_execution_update", "delta": "plain\n"}


async def test_client_reads_dispositions_and_settles(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """RpcClient: prompt, steer and follow_up return the disposition; wait_for_idle ends at
    the run's agent_settled."""
    script = [ok("a", delay=1), ok("b")]
    client_end, server_end = trio.testing.memory_stream_pair()
    provider = FauxProvider(script)
    server = RpcServer(lambda: open_session(provider), server_end)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        async with connect_rpc(client_end) as client:
            with client.events() as events:
                assert await client.prompt("hi") == "started"
                assert await client.follow_up("more") == "queued"
                assert await client.steer("now") == "queued"
                await client.wait_for_idle()
                seen = [e["type"] for e in events.drain()]
    assert seen[-2:] == ["agent_end", "agent_settled"]
    assert seen.count("agent_settled") == 1
    assert trio.current_time() == 1.0
