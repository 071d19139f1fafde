"""pi's version-3 session files, both ways: every entry type, the tree, compaction, migration.

The facts are pi 0.73.1's (docs/session-format.md, dist/core/session-manager.js); the
interop tests in tests/interop/test_pi_files.py check the same files against pi itself.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from trio_session import (
    AssistantMessage,
    CompactionResult,
    FauxProvider,
    FauxReply,
    Model,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    open_session,
)
from trio_session._agent.compactors import Compaction, split_turns
from trio_session._core.messages import (
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    Cost,
    CustomMessage,
    ImageContent,
    Message,
    ThinkingContent,
    Usage,
)
from trio_session._settings.store import CompactionSettings
from trio_session.rpc import (
    RpcClient,
    RpcCommandError,
    SessionRequest,
    connect_rpc,
    open_rpc_client,
    serve_rpc,
)
from trio_session.store._entries import (
    BranchSummaryEntry,
    CompactionEntry,
    CustomEntry,
    CustomMessageEntry,
    HistoryError,
    LabelEntry,
    MessageEntry,
    OtherEntry,
)
from trio_session.store._fork import fork_session
from trio_session.store._history import load_session
from trio_session.store._loaded import runtime_context, session_context
from trio_session.store._open_history import open_history
from trio_session.store._session_file import SessionFile
from trio_session.store._session_list import default_sessions_dir

from .conftest import ERR_503, ERR_OVERFLOW

T0 = 1_750_000_000.0  # 2025-06-15T15:06:40Z
T0_MS = int(T0 * 1000)
PIXEL = (  # a 1x1 PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def new_file(path: Path) -> SessionFile:
    """A new session file with a fixed clock."""
    return SessionFile.create(path, cwd="/src/app", session_id="sess-1", clock=lambda: T0)


def lines(path: Path) -> list[dict[str, Any]]:
    """Every line of a file, decoded."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def every_role() -> list[Message]:
    """One message of every role, in the shapes pi writes them."""
    return [
        UserMessage("plain text", timestamp=1),
        UserMessage((TextContent("look at this"), ImageContent(PIXEL, "image/png")), timestamp=2),
        AssistantMessage(
            content=[
                ThinkingContent("hmm", thinking_signature="sig"),
                TextContent("I will read it"),
                ToolCall("call_1", "read", {"path": "a.txt"}),
            ],
            stop_reason="toolUse",
            usage=Usage(10, 5, 2, 1, Cost(0.1, 0.2, 0.01, 0.02, 0.33)),
            provider="anthropic",
            model="claude-x",
            api="anthropic-messages",
            response_id="msg_1",
            timestamp=3,
        ),
        ToolResultMessage(
            "call_1", "read", (TextContent("data"),), details={"lines": 1}, timestamp=4
        ),
        BashExecutionMessage("ls", "a.txt\n", exit_code=0, timestamp=5),
        CustomMessage("note", "from an extension", display=False, details={"k": 1}, timestamp=6),
        AssistantMessage(
            content=[TextContent("done")], provider="anthropic", model="claude-x", timestamp=7
        ),
    ]


# -- writing and reading every entry type ------------------------------------------------


def test_every_entry_type_round_trips(tmp_path: Path) -> None:
    """Every entry type pi writes (and our settings_change) is written in pi's shape and read
    back as the same value; an unknown type is kept."""
    path = tmp_path / "s.jsonl"
    with new_file(path) as file:
        ids = [file.append_message_nowait(m) for m in every_role()]
        file.append_model_change_nowait("openai", "gpt-x")
        file.append_thinking_level_change_nowait("high")
        file.append_compaction_nowait(
            CompactionResult("summary", 900, 300, 2), first_kept_entry_id=ids[2]
        )
        file.append_custom_nowait("ext-state", {"count": 42})
        file.append_custom_message_nowait("ext", (TextContent("injected"),), details={"d": 1})
        file.append_label_nowait(ids[0], "checkpoint-1")
        file.append_session_info_nowait("  My session  ")
        file.append_settings_change_nowait("retry.enabled", False)
    raw = lines(path)
    assert raw[0] == {
        "type": "session",
        "version": 3,
        "id": "sess-1",
        "timestamp": "2025-06-15T15:06:40.000Z",
        "cwd": "/src/app",
    }
    image_message = raw[2]["message"]
    assert image_message["content"] == [
        {"type": "text", "text": "look at this"},
        {"type": "image", "data": PIXEL, "mimeType": "image/png"},
    ]
    assistant = raw[3]["message"]
    assert (assistant["api"], assistant["responseId"]) == ("anthropic-messages", "msg_1")
    assert assistant["usage"]["cost"] == {
        "input": 0.1,
        "output": 0.2,
        "cacheRead": 0.01,
        "cacheWrite": 0.02,
        "total": 0.33,
    }
    assert assistant["usage"]["totalTokens"] == 18
    shapes = {
        r["type"]: {k: v for k, v in r.items() if k not in ("id", "parentId", "timestamp")}
        for r in raw[8:]
    }
    assert shapes == {
        "model_change": {"type": "model_change", "provider": "openai", "modelId": "gpt-x"},
        "thinking_level_change": {"type": "thinking_level_change", "thinkingLevel": "high"},
        "compaction": {
            "type": "compaction",
            "summary": "summary",
            "tokensBefore": 900,
            "tokensAfter": 300,
            "messagesRemoved": 2,
            "firstKeptEntryId": ids[2],
            "fromHook": False,
        },
        "custom": {"type": "custom", "customType": "ext-state", "data": {"count": 42}},
        "custom_message": {
            "type": "custom_message",
            "customType": "ext",
            "content": [{"type": "text", "text": "injected"}],
            "display": True,
            "details": {"d": 1},
        },
        "label": {"type": "label", "targetId": ids[0], "label": "checkpoint-1"},
        "session_info": {"type": "session_info", "name": "My session"},
        "settings_change": {"type": "settings_change", "key": "retry.enabled", "value": False},
    }
    with path.open("a", encoding="utf-8") as out:
        future = {"type": "future", "id": "0000ffff", "parentId": raw[-1]["id"],
                  "timestamp": "2025-06-15T15:06:41.000Z", "x": [1]}  # fmt: skip
        out.write(json.dumps(future) + "\n")
    loaded = load_session(path)
    assert loaded.warnings == ()
    assert list(loaded.messages) == every_role()
    kinds = [type(e) for e in loaded.entries]
    for kind in (CompactionEntry, CustomEntry, CustomMessageEntry, LabelEntry, OtherEntry):
        assert kind in kinds
    assert (loaded.thinking_level, loaded.model, loaded.session_name) == (
        "high",
        ("openai", "gpt-x"),
        "My session",
    )
    assert loaded.raw["0000ffff"] == future


def test_resumed_context_is_pis_build_session_context(tmp_path: Path) -> None:
    """After a compaction: its summary, the messages from firstKeptEntryId, then the rest;
    custom messages and branch summaries become their messages (buildSessionContext)."""
    path = tmp_path / "s.jsonl"
    with new_file(path) as file:
        ids = [file.append_message_nowait(m) for m in every_role()]
        file.append_compaction_nowait(
            CompactionResult("the summary", 900, 300, 3), first_kept_entry_id=ids[3]
        )
        file.append_custom_message_nowait("ext", "injected", display=True)
        file.append_message_nowait(UserMessage("after", timestamp=9))
    loaded = load_session(path)
    roles = every_role()
    assert runtime_context(loaded) == [
        CompactionSummaryMessage("the summary", 900, timestamp=T0_MS),
        *roles[3:],
        CustomMessage("ext", "injected", display=True, timestamp=T0_MS),
        UserMessage("after", timestamp=9),
    ]
    assert loaded.branch_messages == (*roles, UserMessage("after", timestamp=9))


# -- the tree ----------------------------------------------------------------------------


def test_resume_follows_the_branch_that_ends_at_the_leaf(tmp_path: Path) -> None:
    """A branch back to an earlier entry (with a summary) is followed; the abandoned one is kept
    in the file but leaves the context and the history."""
    path = tmp_path / "s.jsonl"
    with new_file(path) as file:
        first = file.append_message_nowait(UserMessage("a", timestamp=1))
        answer = file.append_message_nowait(AssistantMessage([TextContent("1")], timestamp=2))
        file.append_message_nowait(UserMessage("abandoned", timestamp=3))
        file.append_message_nowait(AssistantMessage([TextContent("x")], timestamp=4))
        file.branch(answer)
        file.append_branch_summary_nowait("tried x")
        file.append_message_nowait(UserMessage("b", timestamp=5))
    loaded = load_session(path)
    assert loaded.warnings == ()
    assert len(loaded.messages) == 5
    assert runtime_context(loaded) == [
        UserMessage("a", timestamp=1),
        AssistantMessage([TextContent("1")], timestamp=2),
        BranchSummaryMessage("tried x", answer, timestamp=T0_MS),
        UserMessage("b", timestamp=5),
    ]
    summary = loaded.entries[4]
    assert isinstance(summary, BranchSummaryEntry)
    assert (summary.parent_id, summary.from_id) == (answer, answer)
    assert [t for _, t in loaded.user_messages()] == ["a", "abandoned", "b"]
    assert session_context(loaded, loaded.entries[3].id)[-1].role == "assistant"
    assert loaded.branch(first) == (loaded.entries[0],)


async def test_session_resumes_on_the_branch(tmp_path: Path) -> None:
    """A resumed session's history and context are the leaf's branch; it appends there."""
    path = tmp_path / "s.jsonl"
    with new_file(path) as file:
        file.append_message_nowait(UserMessage("a", timestamp=1))
        answer = file.append_message_nowait(AssistantMessage([TextContent("1")], timestamp=2))
        file.append_message_nowait(UserMessage("abandoned", timestamp=3))
        file.branch(answer)
        file.append_message_nowait(UserMessage("b", timestamp=5))
        file.append_message_nowait(AssistantMessage([TextContent("2")], timestamp=6))
    async with open_session(FauxProvider([FauxReply(text="3")]), history=path) as session:
        assert [m.text for m in session.history] == ["a", "1", "b", "2"]
        await session.prompt("c")
        assert [m.text for m in session.messages] == ["a", "1", "b", "2", "c", "3"]
    assert [m.text for m in runtime_context(load_session(path))] == ["a", "1", "b", "2", "c", "3"]


# -- compaction, then resume: the same context ---------------------------------------------


class LastTurnCompactor:
    """Keeps the last turn behind a ``CompactionSummaryMessage``, as pi's context has it."""

    async def compact(
        self, messages: Sequence[Message], *, model: Model, settings: CompactionSettings, ask: Any
    ) -> Compaction | None:
        turns = split_turns(messages)
        if len(turns) < 2:
            return None
        kept = turns[-1]
        result = CompactionResult("older turns", 1234, 100, len(messages) - len(kept))
        summary = CompactionSummaryMessage("older turns", 1234, timestamp=T0_MS)
        return Compaction(messages=(summary, *kept), result=result)


async def test_compaction_then_resume_gives_the_same_context(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """R-50, R-20: after an overflow compaction and a restart the context is what it was
    live; the compaction entry keeps from the first kept message (not the summary)."""
    path = tmp_path / "s.jsonl"
    script = [FauxReply(text="a1"), FauxReply(text="b1"), FauxReply(error=ERR_OVERFLOW)]
    script += [FauxReply(error=ERR_503), FauxReply(text="c2")]
    model = Model(id="m", provider="faux", context_window=200_000)
    history = new_file(path)
    async with open_session(
        FauxProvider(script), model, compactor=LastTurnCompactor(), history=history
    ) as session:
        for text in ("a", "b", "c"):
            await session.prompt(text)
        live = list(session.messages)
    history.close()
    loaded = load_session(path)
    compaction = next(e for e in loaded.entries if isinstance(e, CompactionEntry))
    kept = loaded.entry(compaction.first_kept_entry_id or "")
    assert isinstance(kept, MessageEntry)
    assert isinstance(kept.message, UserMessage)
    assert kept.message.content == (TextContent("c"),)  # pi's shape: a content array
    assert [m.role for m in live] == ["compactionSummary", "user", "assistant"]
    assert runtime_context(loaded) == live
    async with open_session(FauxProvider([]), model, history=path) as resumed:
        assert list(resumed.messages) == live


class KeepFromCustomCompactor:
    """Keeps everything from the first ``CustomMessage`` on, behind a summary."""

    async def compact(
        self, messages: Sequence[Message], *, model: Model, settings: CompactionSettings, ask: Any
    ) -> Compaction | None:
        start = next(i for i, m in enumerate(messages) if isinstance(m, CustomMessage))
        result = CompactionResult("before the note", 99, 10, start)
        summary = CompactionSummaryMessage("before the note", 99, timestamp=T0_MS)
        return Compaction(messages=(summary, *messages[start:]), result=result)


async def test_compaction_can_keep_from_a_resumed_custom_message(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A context message rebuilt from a custom_message entry is known to the file, so a
    compaction that keeps from it names that entry, and the next resume keeps it too."""
    path = tmp_path / "s.jsonl"
    with new_file(path) as file:
        file.append_message_nowait(UserMessage("a", timestamp=1))
        file.append_message_nowait(AssistantMessage([TextContent("1")], timestamp=2))
        note = file.append_custom_message_nowait("ext", "note", display=True)
    model = Model(id="m", provider="faux", context_window=200_000)
    script = [FauxReply(error=ERR_OVERFLOW), FauxReply(text="b2")]
    history = SessionFile.resume(path, clock=lambda: T0)
    async with open_session(
        FauxProvider(script), model, compactor=KeepFromCustomCompactor(), history=history
    ) as session:
        await session.prompt("b")
        live = list(session.messages)
    history.close()
    loaded = load_session(path)
    compaction = next(e for e in loaded.entries if isinstance(e, CompactionEntry))
    assert compaction.first_kept_entry_id == note
    assert [m.role for m in live] == ["compactionSummary", "custom", "user", "assistant"]
    assert runtime_context(loaded) == live


async def test_default_compactor_keeps_from_the_first_kept_message(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """R-50: with the default compactor (its summary first) the entry names the first message
    it kept, and a resume keeps exactly those messages after pi's summary message."""
    path = tmp_path / "s.jsonl"
    script = [FauxReply(text=t) for t in ("a1", "b1", "c1", "d1")]
    script += [FauxReply(error=ERR_OVERFLOW), FauxReply(text="summary"), FauxReply(text="e2")]
    model = Model(id="m", provider="faux", context_window=200_000)
    history = new_file(path)
    async with open_session(FauxProvider(script), model, history=history) as session:
        for text in ("a", "b", "c", "d", "e"):
            await session.prompt(text)
        live = list(session.messages)
    history.close()
    loaded = load_session(path)
    compaction = next(e for e in loaded.entries if isinstance(e, CompactionEntry))
    assert compaction.first_kept_entry_id is not None
    resumed = runtime_context(loaded)
    assert resumed[0] == CompactionSummaryMessage(
        compaction.summary, compaction.tokens_before, timestamp=live[0].timestamp
    )
    assert resumed == live  # the entry carries the live summary's time
    assert live[0] not in loaded.messages  # the live summary is not a message entry


# -- migrations ----------------------------------------------------------------------------


def test_version_1_file_is_migrated_and_rewritten_on_resume(tmp_path: Path) -> None:
    """pi's v1 → v3 migration: ids and parents given, firstKeptEntryIndex becomes an id,
    hookMessage becomes custom; resuming rewrites the file as version 3 and appends to it."""
    path = tmp_path / "old.jsonl"
    records = [
        {"type": "session", "id": "old", "timestamp": "2024-01-01T00:00:00.000Z", "cwd": "/"},
        {"type": "message", "timestamp": "2024-01-01T00:00:01.000Z",
         "message": {"role": "user", "content": "one", "timestamp": 1}},
        {"type": "message", "timestamp": "2024-01-01T00:00:02.000Z",
         "message": {"role": "hookMessage", "customType": "h", "content": "hooked",
                     "display": True, "timestamp": 2}},
        {"type": "compaction", "timestamp": "2024-01-01T00:00:03.000Z", "summary": "s",
         "firstKeptEntryIndex": 2, "tokensBefore": 50},
        {"type": "message", "timestamp": "2024-01-01T00:00:04.000Z",
         "message": {"role": "user", "content": "two", "timestamp": 4}},
    ]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    loaded = load_session(path)
    assert loaded.migrated_from == 1
    assert loaded.header.version == 3
    parents = [e.parent_id for e in loaded.entries]
    assert parents == [None, *[e.id for e in loaded.entries[:-1]]]
    compaction = loaded.entries[2]
    assert isinstance(compaction, CompactionEntry)
    assert compaction.first_kept_entry_id == loaded.entries[1].id
    context = runtime_context(loaded)
    assert context == [
        CompactionSummaryMessage("s", 50, timestamp=1_704_067_203_000),
        CustomMessage("h", "hooked", display=True, timestamp=2),
        UserMessage("two", timestamp=4),
    ]
    with SessionFile.resume(path) as file:
        assert file.loaded is not None
        assert file.loaded.warnings == (
            f"{path}: migrated from format version 1 to 3 (the file was rewritten)",
        )
        file.append_message_nowait(UserMessage("three", timestamp=5))
    again = load_session(path)
    assert again.migrated_from is None
    assert again.warnings == ()
    assert lines(path)[0]["version"] == 3
    assert runtime_context(again) == [*context, UserMessage("three", timestamp=5)]


# -- fork and clone -------------------------------------------------------------------------


def test_fork_copies_the_branch_losslessly(tmp_path: Path) -> None:
    """A fork holds the branch's entries as read — fields and entry types we do not model
    included — then its labels; its header names the source as parentSession."""
    path = tmp_path / "s.jsonl"
    with new_file(path) as file:
        first = file.append_message_nowait(UserMessage("a", timestamp=1))
        file.append_label_nowait(first, "start")
        answer = file.append_message_nowait(AssistantMessage([TextContent("1")], timestamp=2))
        file.append_message_nowait(UserMessage("b", timestamp=3))
    raw = lines(path)
    raw[3]["message"]["content"][0]["textSignature"] = "kept-as-is"  # a field we do not model
    raw.insert(4, {"type": "future", "id": "0000ffff", "parentId": answer,
                   "timestamp": "2025-06-15T15:06:41.000Z", "y": 1})  # fmt: skip
    raw[5]["parentId"] = "0000ffff"
    path.write_text("".join(json.dumps(r) + "\n" for r in raw), encoding="utf-8")
    forked = fork_session(path, "0000ffff", clock=lambda: T0 + 1)
    copied = lines(forked)
    assert copied[0]["parentSession"] == str(path)
    assert copied[0]["id"] != "sess-1"
    assert copied[1] == raw[1]
    # The old label is left out (written anew below); the answer, its child, is linked to
    # the label's parent so the chain holds; everything else is as read.
    assert copied[2] == {**raw[3], "parentId": first}
    assert copied[3] == raw[4]
    assert load_session(forked).warnings == ()
    label = copied[4]
    assert {k: label[k] for k in ("type", "parentId", "targetId", "label")} == {
        "type": "label",
        "parentId": "0000ffff",
        "targetId": first,
        "label": "start",
    }
    assert forked.parent == path.parent
    with pytest.raises(HistoryError, match=r"has no entry 'nope'$"):
        fork_session(path, "nope")
    empty = fork_session(path, None, directory=tmp_path / "other")
    assert [r["type"] for r in lines(empty)] == ["session"]


async def test_session_name_and_fork_messages(tmp_path: Path) -> None:
    """``set_session_name`` writes a session_info entry (trimmed); ``fork_messages`` lists the
    user messages with their entry ids, as pi's getUserMessagesForForking."""
    path = tmp_path / "s.jsonl"
    script = [FauxReply(text="1"), FauxReply(text="2")]
    async with open_session(FauxProvider(script), history=path) as session:
        assert (session.session_name, session.session_file) == (None, path)
        await session.prompt("first")
        session.set_session_name("  Work  ")
        await session.prompt("second")
        assert session.session_name == "Work"
        forks = session.fork_messages()
    loaded = load_session(path)
    users = [
        e.id for e in loaded.entries if isinstance(e, MessageEntry) and e.message.role == "user"
    ]
    assert forks == list(zip(users, ["first", "second"], strict=True))
    assert loaded.session_name == "Work"
    async with open_session(FauxProvider([]), history=path) as again:
        assert again.session_name == "Work"
        assert again.fork_messages() == forks
        again.set_session_name("")
        assert again.session_name is None
    assert load_session(path).session_name is None
    async with open_session(FauxProvider([])) as memory:
        memory.set_session_name("x")
        assert (memory.session_name, memory.fork_messages(), memory.session_file) == ("x", [], None)


# -- the session-tree commands over RPC -------------------------------------------------------


def file_sessions(directory: Path, provider: FauxProvider) -> Any:
    """A session factory like ``trio-session rpc``'s: new files in ``directory``."""

    @asynccontextmanager
    async def sessions(request: SessionRequest) -> AsyncIterator[Any]:
        if request.history is not None:
            opened = open_history(request.history)
        else:
            opened = open_history(directory=directory, parent_session=request.parent_session)
        async with opened as file, open_session(provider, history=file) as session:
            yield session

    return sessions


@asynccontextmanager
async def rpc_client(sessions: Any) -> AsyncIterator[RpcClient]:
    """A client talking to ``serve_rpc(sessions)`` over an in-memory stream."""
    client_end, server_end = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve_rpc, sessions, server_end)
        async with connect_rpc(client_end) as client:
            yield client


async def ask(client: RpcClient, text: str) -> None:
    """Prompt and wait until the run is over."""
    await client.prompt(text)
    await client.wait_for_idle()


def header(path: str | Path) -> dict[str, Any]:
    """The session header of a file."""
    return lines(Path(path))[0]


async def test_rpc_session_tree_commands(tmp_path: Path) -> None:
    """R-42: get_state's sessionFile/sessionName, set_session_name, get_fork_messages, fork,
    clone, switch_session and new_session {parentSession}, in pi's shapes."""
    replies = [FauxReply(text=t) for t in ("r1", "r2", "r3", "r4")]
    sessions = file_sessions(tmp_path / "sessions", FauxProvider(replies))
    with trio.fail_after(30):
        async with rpc_client(sessions) as client:
            state = await client.get_state()
            first = state["sessionFile"]
            assert Path(first).parent == tmp_path / "sessions"
            assert "sessionName" not in state
            await ask(client, "one")
            await ask(client, "two")
            await client.set_session_name("  Named  ")
            assert (await client.get_state())["sessionName"] == "Named"
            with pytest.raises(RpcCommandError, match=r": Session name cannot be empty$"):
                await client.set_session_name("   ")
            forks = await client.get_fork_messages()
            assert [m["text"] for m in forks] == ["one", "two"]
            assert set(forks[0]) == {"entryId", "text"}

            assert await client.fork(forks[1]["entryId"]) == {"text": "two", "cancelled": False}
            forked = (await client.get_state())["sessionFile"]
            assert forked != first
            assert header(forked)["parentSession"] == first
            assert [m["role"] for m in await client.get_messages()] == ["user", "assistant"]

            assert await client.clone() == {"cancelled": False}
            cloned = (await client.get_state())["sessionFile"]
            assert cloned not in (first, forked)
            assert header(cloned)["parentSession"] == forked
            assert len(await client.get_messages()) == 2

            assert await client.switch_session(first) == {"cancelled": False}
            state = await client.get_state()
            assert (state["sessionFile"], state["sessionName"]) == (first, "Named")
            assert len(await client.get_messages()) == 4
            await ask(client, "three")  # the resumed session appends to its file
            assert [m["text"] for m in await client.get_fork_messages()] == ["one", "two", "three"]

            assert await client.fork(forks[0]["entryId"]) == {"text": "one", "cancelled": False}
            empty = (await client.get_state())["sessionFile"]
            assert await client.get_messages() == []
            assert header(empty)["parentSession"] == first

            assert await client.new_session(parent_session="/elsewhere/p.jsonl") == {
                "cancelled": False
            }
            await ask(client, "four")  # a new file is written with its first message
            assert header((await client.get_state())["sessionFile"])["parentSession"] == (
                "/elsewhere/p.jsonl"
            )
    assert load_session(first).session_name == "Named"


async def test_rpc_a_refused_fork_leaves_the_run_running(tmp_path: Path) -> None:
    """As pi's: a fork to an entry that is not a user message is refused before anything
    is torn down -- the prompt running meanwhile goes on, and ends as it would have."""
    provider = FauxProvider([FauxReply(text="r1"), FauxReply(chunks=["half"], hang=True)])
    sessions = file_sessions(tmp_path, provider)
    with trio.fail_after(30):
        async with rpc_client(sessions) as client:
            await ask(client, "one")
            with client.events() as events:
                await client.prompt("two")
                await events.next("message_update")
                with pytest.raises(
                    RpcCommandError, match=r"^fork failed: Invalid entry ID for forking$"
                ):
                    await client.fork("nope")
                state = await client.get_state()
                assert (state["isStreaming"], state["messageCount"]) == (True, 3)
                seen = {e["type"] for e in events.drain()}
                assert seen <= {"message_update"}  # no message_end, no agent_settled
                await client.abort()
                assert [e["type"] for e in events.drain()][-1] == "agent_settled"


async def test_rpc_session_tree_errors_leave_the_session_alone(tmp_path: Path) -> None:
    """A bad entry id, a file that is not a session, or switching to the current file: a clear
    error (or a clean reopen), and the session being served stays."""
    sessions = file_sessions(tmp_path, FauxProvider([FauxReply(text="r1")]))
    notes = tmp_path / "notes.jsonl"
    notes.write_text('{"hello": "world"}\n', encoding="utf-8")
    with trio.fail_after(30):
        async with rpc_client(sessions) as client:
            await ask(client, "one")
            current = (await client.get_state())["sessionFile"]
            with pytest.raises(
                RpcCommandError, match=r"^fork failed: Invalid entry ID for forking$"
            ):
                await client.fork("nope")
            answer = next(
                e.id
                for e in load_session(current).entries
                if isinstance(e, MessageEntry) and e.message.role == "assistant"
            )
            with pytest.raises(RpcCommandError, match=r"Invalid entry ID for forking$"):
                await client.fork(answer)  # not a user message
            expected = (
                f"switch_session failed: session file {notes} does not start with a session "
                "header: line 1 has type None, not type 'session'"
            )
            with pytest.raises(RpcCommandError, match=f"^{re.escape(expected)}$"):
                await client.switch_session(str(notes))
            assert (await client.get_state())["sessionFile"] == current
            assert await client.switch_session(current) == {"cancelled": False}
            assert (await client.get_state())["sessionFile"] == current
            assert len(await client.get_messages()) == 2
    assert notes.read_text(encoding="utf-8") == '{"hello": "world"}\n'


async def test_rpc_clone_before_anything_is_saved_is_refused_as_pi_does(tmp_path: Path) -> None:
    """Issue 41, row 7: clone of a session whose file is not written yet (no message
    sent) is refused in pi 1.6.0's words, and the session is left as it was."""
    sessions = file_sessions(tmp_path / "sessions", FauxProvider([FauxReply(text="r1")]))
    with trio.fail_after(30):
        async with rpc_client(sessions) as client:
            first = (await client.get_state())["sessionFile"]
            expected = (
                "clone failed: This session has not been saved yet. Send a message before "
                "cloning or forking it."
            )
            with pytest.raises(RpcCommandError, match=f"^{re.escape(expected)}$"):
                await client.clone()
            assert (await client.get_state())["sessionFile"] == first
            await ask(client, "one")
            assert await client.clone() == {"cancelled": False}
            assert header((await client.get_state())["sessionFile"])["parentSession"] == first


async def test_rpc_without_session_files(tmp_path: Path) -> None:
    """A factory that takes no request serves new_session only; a session without a file
    cannot be forked or cloned, and get_state omits sessionFile."""
    provider = FauxProvider([])
    with trio.fail_after(30):
        async with rpc_client(lambda: open_session(provider)) as client:
            assert "sessionFile" not in await client.get_state()
            with pytest.raises(RpcCommandError, match=r"^clone failed: clone needs a session"):
                await client.clone()
            assert await client.new_session() == {"cancelled": False}

        def memory(request: SessionRequest) -> Any:
            return open_session(provider)

        async with rpc_client(memory) as client:
            with pytest.raises(
                RpcCommandError,
                match=r"^fork failed: Cannot fork: this session keeps no session file$",
            ):
                await client.fork("x")
            assert await client.get_fork_messages() == []


# -- trio-session rpc keeps a session file like pi --------------------------------------------


async def test_rpc_command_session_file_options(tmp_path: Path) -> None:
    """The real ``trio-session rpc``: a new file under the data dir for the cwd by default,
    under ``--session-dir``, none with ``--no-session``; ``--session FILE`` resumes it."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "r1"}, {"text": "r2"}]), encoding="utf-8")
    faux = ["--faux", str(script)]
    with trio.fail_after(60):
        async with open_rpc_client(args=faux) as client:
            default = Path((await client.get_state())["sessionFile"])
        assert default.parent == default_sessions_dir()  # XDG_DATA_HOME is the test's own
        async with open_rpc_client(args=[*faux, "--session-dir", str(tmp_path / "d")]) as client:
            chosen = (await client.get_state())["sessionFile"]
            await ask(client, "one")
            await client.set_session_name("kept")
        assert Path(chosen).parent == tmp_path / "d"
        async with open_rpc_client(args=[*faux, "--no-session"]) as client:
            assert "sessionFile" not in await client.get_state()
        async with open_rpc_client(args=[*faux, "--session", chosen]) as client:
            state = await client.get_state()
            assert (state["sessionFile"], state["sessionName"]) == (chosen, "kept")
            assert [m["role"] for m in await client.get_messages()] == ["user", "assistant"]


async def test_default_compactor_then_resume_gives_exactly_the_live_context(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """R-50, issue 12: with the default compactor (a real summary request), the context
    rebuilt from the file after a restart is the live one exactly — the summary message
    included, its time too (the compaction entry carries the summary's time)."""
    path = tmp_path / "s.jsonl"
    model = Model(id="m", provider="faux", context_window=200_000)
    script = [FauxReply(text="a1"), FauxReply(text="b1"), FauxReply(error=ERR_OVERFLOW)]
    script += [FauxReply(text="the summary"), FauxReply(text="c2")]
    async with open_session(FauxProvider(script), model, history=path) as session:
        for text in ("a", "b", "c"):
            await session.prompt(text)
        live = list(session.messages)
    assert [m.role for m in live] == ["compactionSummary", "user", "assistant"]
    async with open_session(FauxProvider([]), model, history=path) as resumed:
        assert list(resumed.messages) == live
    entry = next(e for e in load_session(path).entries if isinstance(e, CompactionEntry))
    assert (entry.details, entry.from_hook) == ({"readFiles": [], "modifiedFiles": []}, False)
