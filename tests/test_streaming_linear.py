"""Streaming without quadratic cost: what the cheap snapshots must not change (issue 15).

A ``message_update`` carries a view of the message so far, made into the message
when first read. These tests pin what that must keep: every update's message is
the text of the deltas up to it, read whenever; ``"partial"`` is that message;
the JSON is the reference's shape; the codec writes what it wrote before; and the
opt-in lean RPC mode writes deltas only, over a real ``trio-session rpc`` process.
"""

from __future__ import annotations

import json
import random
import tracemalloc
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_session import (
    AssistantMessage,
    FauxProvider,
    FauxReply,
    MessageUpdate,
    Model,
    SessionEvent,
    TextContent,
    ToolCall,
    Usage,
    event_from_json,
    event_to_json,
    message_to_json,
    open_session,
)
from trio_session._agent.builder import MessageBuilder as _Builder
from trio_session._core.codec import camel, to_json, update_to_json
from trio_session._core.events import PartialMessage, StreamEvent
from trio_session._core.messages import ThinkingContent
from trio_session.providers._base import StreamEnd
from trio_session.rpc import LineSplitter, RpcServer, open_rpc_client
from trio_session.rpc._outbox import merge_updates
from trio_session.testing import EventRecorder

from .test_codec import DONE, EVENTS, MESSAGES

MODEL = Model(id="faux-model", provider="faux", api="faux-api")
CHUNKS = tuple(f"w{i} " for i in range(300))


async def _streamed(reply: FauxReply) -> list[SessionEvent]:
    async with open_session(FauxProvider([reply]), MODEL) as session:
        recorder = EventRecorder.attach(session)
        await session.prompt("hi")
    return recorder.events


def _updates(events: list[SessionEvent]) -> list[MessageUpdate]:
    return [e for e in events if isinstance(e, MessageUpdate)]


# -- snapshots ----------------------------------------------------------------------------


async def test_every_update_holds_the_deltas_up_to_it_read_after_the_stream() -> None:
    """Read after the reply ended, the k-th text_delta's message is the join of the
    first k deltas — later chunks did not change an earlier event."""
    updates = _updates(await _streamed(FauxReply(chunks=CHUNKS)))
    deltas = [u for u in updates if u.assistant_message_event["type"] == "text_delta"]
    assert [u.delta for u in deltas] == list(CHUNKS)
    for k, update in enumerate(deltas, start=1):
        assert update.message.text == "".join(CHUNKS[:k])
        assert update.message.content == (TextContent("".join(CHUNKS[:k])),)
    assert updates[0].assistant_message_event["type"] == "text_start"
    assert updates[0].message.content == (TextContent(""),)
    assert updates[-1].assistant_message_event["type"] == "text_end"
    assert updates[-1].message.text == "".join(CHUNKS)


async def test_partial_is_the_message_and_reads_as_a_mapping() -> None:
    """``assistant_message_event["partial"]`` equals ``message``; the mapping has the
    reference's keys in order, and equals the plain dict it stands for."""
    updates = _updates(await _streamed(FauxReply(chunks=CHUNKS[:5])))
    for update in updates:
        event = update.assistant_message_event
        assert event["partial"] == update.message
        assert event.get("partial") == update.message
        assert "partial" in event
        assert list(event)[-1] == "partial"
        assert event == dict(event)
        assert dict(event) == {**event}
    kinds = [list(u.assistant_message_event) for u in updates]
    assert kinds[0] == ["type", "contentIndex", "partial"]
    assert kinds[1] == ["type", "contentIndex", "delta", "partial"]
    assert kinds[-1] == ["type", "contentIndex", "content", "partial"]


async def test_a_lazy_update_equals_the_update_made_by_hand() -> None:
    """Equality, repr and JSON see the message, not the view it was made from."""
    update = _updates(await _streamed(FauxReply(chunks=("a", "b"))))[2]
    by_hand = MessageUpdate(
        message=update.message,
        delta=update.delta,
        assistant_message_event=dict(update.assistant_message_event),
    )
    assert isinstance(update.assistant_message_event, StreamEvent)
    assert update == by_hand
    assert repr(update) == repr(by_hand)
    assert repr(update).startswith("MessageUpdate(message=AssistantMessage(")
    assert event_to_json(update) == event_to_json(by_hand)


Op = tuple[str, Any]
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("text"), st.text(max_size=3)),
        st.tuples(st.just("thinking"), st.text(max_size=3)),
        st.tuples(st.just("signature"), st.text(max_size=2)),
        st.tuples(st.just("tool"), st.integers(0, 3)),
        st.tuples(st.just("usage"), st.integers(0, 50)),
        st.tuples(st.just("response"), st.sampled_from(["r1", "r2"])),
    ),
    max_size=30,
)


def _play(ops: list[Op], emit: Any, end: StreamEnd) -> AssistantMessage:
    builder = _Builder(emit, "faux", MODEL)
    for kind, value in ops:
        if kind == "text":
            builder.text(value)
        elif kind == "thinking":
            builder.thinking(value)
        elif kind == "signature":
            builder.thinking_signature(value)
        elif kind == "tool":
            builder.tool_call(ToolCall(id=f"c{value}", name="read", arguments={"n": value}))
        elif kind == "usage":
            builder.usage(Usage(input=value, output=1))
        else:
            builder.response(value)
    return builder.finish(end)


def _untimed(message: AssistantMessage) -> AssistantMessage:
    return attrs.evolve(message, timestamp=0)


@settings(deadline=None, max_examples=150)
@given(ops=OPS, end=st.sampled_from([StreamEnd(), StreamEnd.error("503"), StreamEnd("aborted")]))
def test_views_read_late_equal_snapshots_read_at_once(ops: list[Op], end: StreamEnd) -> None:
    """Any mix of text, thinking, signatures, tool calls, usage and response ids: every
    update's message read after the stream equals the one read when it was emitted."""
    at_once: list[AssistantMessage] = []
    late: list[SessionEvent] = []

    def read_now(event: SessionEvent) -> None:
        if isinstance(event, MessageUpdate):
            at_once.append(_untimed(event.message))

    final_a = _play(ops, read_now, end)
    final_b = _play(ops, late.append, end)
    assert [_untimed(u.message) for u in _updates(late)] == at_once
    assert _untimed(final_a) == _untimed(final_b)
    for update in _updates(late):
        assert update.assistant_message_event["partial"] == update.message


@settings(deadline=None, max_examples=150)
@given(ops=OPS, order=st.randoms(use_true_random=False))
def test_views_read_in_any_order_equal_snapshots_read_at_once(
    ops: list[Op], order: random.Random
) -> None:
    """A view joins its growing part's text from the text the last view joined: read in
    any order (a newer update's message before an older one's, some during the stream,
    the rest after it), each update still holds exactly its own text."""
    at_once: list[AssistantMessage] = []

    def read_now(event: SessionEvent) -> None:
        if isinstance(event, MessageUpdate):
            at_once.append(_untimed(event.message))

    _play(ops, read_now, StreamEnd())
    events: list[SessionEvent] = []
    read: dict[int, AssistantMessage] = {}

    def read_some(event: SessionEvent) -> None:
        events.append(event)
        updates = _updates(events)
        if updates and order.random() < 0.4:  # any update so far, newest or older
            i = order.randrange(len(updates))
            read.setdefault(i, _untimed(updates[i].message))

    _play(ops, read_some, StreamEnd())
    updates = _updates(events)
    rest = [i for i in range(len(updates)) if i not in read]
    order.shuffle(rest)
    for i in rest:
        read[i] = _untimed(updates[i].message)
    assert [read[i] for i in range(len(updates))] == at_once


async def _kept_bytes(n: int) -> int:
    """Bytes still allocated after a prompt of ``n`` chunks whose every event is kept."""
    reply = FauxReply(chunks=tuple(f"word{i} " for i in range(n)))
    async with open_session(FauxProvider([reply]), MODEL) as session:
        recorder = EventRecorder.attach(session)
        tracemalloc.start()
        try:
            await session.prompt("hi")
            size, _peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert len(recorder.events) > n
    return size


async def test_keeping_every_update_costs_memory_linear_in_chunks() -> None:
    """A subscriber that keeps every update keeps views, not copies of the text so far:
    4x the chunks is about 4x the memory (a snapshot per update made it 16x)."""
    small, large = await _kept_bytes(500), await _kept_bytes(2000)
    assert large < 5 * small


def test_a_signature_after_the_part_closed_leaves_earlier_views_alone() -> None:
    """A thinking part's signature added once it is closed (a provider's last word)
    shows in later messages only."""
    events: list[SessionEvent] = []
    builder = _Builder(events.append, "faux", MODEL)
    builder.thinking("hmm")
    builder._close_part()
    builder.thinking_signature("sig")
    final = builder.finish(StreamEnd())
    assert [u.message.content for u in _updates(events)][-1] == (ThinkingContent("hmm"),)
    assert final.content == (ThinkingContent("hmm", thinking_signature="sig"),)


def test_a_view_is_made_once() -> None:
    """The message a view makes is kept: reading it twice gives the same object."""
    events: list[SessionEvent] = []
    builder = _Builder(events.append, "faux", MODEL)
    builder.text("a")
    update = _updates(events)[-1]
    assert isinstance(update.assistant_message_event, StreamEvent)
    view = update.assistant_message_event.view
    assert isinstance(view, PartialMessage)
    assert update.message is update.message is update.assistant_message_event["partial"]


# -- JSON ---------------------------------------------------------------------------------


def _reference_to_json(value: Any) -> Any:
    """The codec's encoder as it was before it cached its walk (the output to keep).

    One change: a field is read by its public name (``MessageUpdate.message`` is now a
    property over the private field that may hold a view); no other class has one.
    """
    if attrs.has(type(value)):
        out: dict[str, Any] = {}
        for key in ("type", "role"):
            if hasattr(value, key) and isinstance(getattr(value, key), str):
                out[key] = getattr(value, key)
        for field in attrs.fields(type(value)):
            name = field.name.lstrip("_")
            item = getattr(value, name)
            if item is None or name in out:
                continue
            out[camel(name)] = _reference_to_json(item)
        if hasattr(value, "total_tokens"):
            out["totalTokens"] = value.total_tokens
        return out
    if isinstance(value, (tuple, list)):
        return [_reference_to_json(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _reference_to_json(v) for k, v in value.items()}
    return value


@pytest.mark.parametrize("value", [*EVENTS, *MESSAGES], ids=lambda v: type(v).__name__)
def test_the_codec_writes_what_it_wrote_before(value: Any) -> None:
    """Byte for byte the old encoder's output, key order included."""
    assert json.dumps(to_json(value)) == json.dumps(_reference_to_json(value))


async def test_streamed_updates_encode_as_before_in_the_reference_shape() -> None:
    """A streamed update's JSON is the old encoder's for the same event made by hand:
    ``{"type", "message", "delta", "assistantMessageEvent": {…, "partial"}}``."""
    events = await _streamed(
        FauxReply(chunks=("Hel", "lo"), tool_calls=(ToolCall(id="c", name="t"),))
    )
    for update in _updates(events):
        by_hand = MessageUpdate(
            message=update.message,
            delta=update.delta,
            assistant_message_event=dict(update.assistant_message_event),
        )
        data = event_to_json(update)
        assert json.dumps(data) == json.dumps(_reference_to_json(by_hand))
        assert json.dumps(update_to_json(update)) == json.dumps(data)
        assert list(data) == ["type", "message", "delta", "assistantMessageEvent"]
        assert data["assistantMessageEvent"]["partial"] == message_to_json(update.message)
    for event in events:  # and every event of the reply reads back to the same JSON
        data = json.loads(json.dumps(event_to_json(event)))
        assert event_to_json(event_from_json(data)) == data


def test_a_decoded_update_has_its_message() -> None:
    """``event_from_json`` reads ``message`` into the update's message."""
    data = event_to_json(MessageUpdate(message=DONE, delta="x"))
    decoded = event_from_json(data)
    assert isinstance(decoded, MessageUpdate)
    assert decoded.message == DONE


def test_lean_json_leaves_out_the_message() -> None:
    """Lean: the stream event's own fields only, for a streamed update and one by hand."""
    events: list[SessionEvent] = []
    builder = _Builder(events.append, "faux", MODEL)
    builder.text("Hi")
    builder.tool_call(ToolCall(id="c", name="t", arguments={"a": 1}))
    lean = [update_to_json(u, lean=True) for u in _updates(events)]
    assert lean == [
        {
            "type": "message_update",
            "assistantMessageEvent": {"type": "text_start", "contentIndex": 0},
        },
        {
            "type": "message_update",
            "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": "Hi"},
        },
        {
            "type": "message_update",
            "assistantMessageEvent": {"type": "text_end", "contentIndex": 0, "content": "Hi"},
        },
        {
            "type": "message_update",
            "assistantMessageEvent": {
                "type": "toolcall_start",
                "contentIndex": 1,
                "id": "c",
                "toolName": "t",
            },
        },
        {
            "type": "message_update",
            "assistantMessageEvent": {
                "type": "toolcall_delta",
                "contentIndex": 1,
                "delta": '{"a": 1}',
            },
        },
        {
            "type": "message_update",
            "assistantMessageEvent": {
                "type": "toolcall_end",
                "contentIndex": 1,
                "toolCall": {"type": "toolCall", "id": "c", "name": "t", "arguments": {"a": 1}},
            },
        },
    ]
    by_hand = MessageUpdate(
        message=DONE,
        delta="x",
        assistant_message_event={
            "type": "text_delta",
            "contentIndex": 0,
            "delta": "x",
            "partial": 1,
        },
    )
    assert update_to_json(by_hand, lean=True) == {
        "type": "message_update",
        "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": "x"},
    }


def test_lean_updates_merge_like_full_ones() -> None:
    """A lagging client's lean text deltas merge into one, as full ones do."""
    first = {
        "type": "message_update",
        "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": "a"},
    }
    second = {
        "type": "message_update",
        "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": "b"},
    }
    assert merge_updates(first, second) == {
        "type": "message_update",
        "assistantMessageEvent": {"type": "text_delta", "contentIndex": 0, "delta": "ab"},
    }


# -- the RPC server -------------------------------------------------------------------------


def _accumulate(lines: list[dict[str, Any]]) -> dict[int, str]:
    """What a lean client does: text deltas appended by ``contentIndex``."""
    texts: dict[int, str] = {}
    for obj in lines:
        if obj["type"] == "message_update":
            event = obj["assistantMessageEvent"]
            if event["type"] == "text_delta":
                index = event["contentIndex"]
                texts[index] = texts.get(index, "") + event["delta"]
    return texts


async def _served(lean: bool) -> list[dict[str, Any]]:
    """Every line an in-process server writes for a 50-chunk reply, up to ``agent_settled``."""
    reply = FauxReply(chunks=CHUNKS[:50])
    ours, theirs = trio.testing.memory_stream_pair()
    server = RpcServer(
        lambda: open_session(FauxProvider([reply]), MODEL), theirs, lean_updates=lean
    )
    lines: list[dict[str, Any]] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        await ours.send_all(b'{"type":"prompt","message":"hi"}\n')
        splitter = LineSplitter(None)
        while not lines or lines[-1]["type"] != "agent_settled":
            for line in splitter.feed(await ours.receive_some()):
                assert isinstance(line, bytes)
                lines.append(json.loads(line))
        await ours.send_eof()
        while await ours.receive_some():
            pass
    return lines


async def test_the_server_writes_the_reference_shape_by_default_and_lean_on_request() -> None:
    """The same reply: by default every update carries ``message`` and ``partial``; lean,
    none does, the deltas rebuild the text, and every other line is the same."""
    full, lean = await _served(False), await _served(True)
    full_updates = [o for o in full if o["type"] == "message_update"]
    lean_updates = [o for o in lean if o["type"] == "message_update"]
    assert all(
        o["message"] == o["assistantMessageEvent"]["partial"] and "delta" in o for o in full_updates
    )
    assert all(list(o) == ["type", "assistantMessageEvent"] for o in lean_updates)
    assert all("partial" not in o["assistantMessageEvent"] for o in lean_updates)
    assert [o["assistantMessageEvent"] for o in lean_updates] == [
        {k: v for k, v in o["assistantMessageEvent"].items() if k != "partial"}
        for o in full_updates
    ]
    text = "".join(CHUNKS[:50])
    assert _accumulate(lean) == _accumulate(full) == {0: text}
    assert [o["type"] for o in lean] == [o["type"] for o in full]
    ends = [o for o in lean if o["type"] == "message_end"]
    assert ends[-1]["message"]["content"] == [{"type": "text", "text": text}]


@pytest.mark.parametrize("how", ["flag", "client option"])
async def test_a_real_rpc_process_writes_lean_updates(tmp_path: Path, how: str) -> None:
    """``trio-session rpc --lean-updates`` (or ``open_rpc_client(lean_updates=True)``):
    message_update lines carry the stream event without ``partial`` or ``message``;
    a client that accumulates deltas by ``contentIndex`` has the whole answer, and
    message_start / message_end are whole."""
    chunks = [f"part {i}, " for i in range(40)]
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "".join(chunks), "chunks": chunks}]))
    args = ["--faux", str(script), "--no-session"]
    options: dict[str, Any] = {"lean_updates": True}
    if how == "flag":
        args.append("--lean-updates")
        options = {}
    seen: list[dict[str, Any]] = []
    with trio.fail_after(60):
        async with open_rpc_client(args=args, **options) as client:
            with client.events() as events:
                await client.prompt("hi")
                async for event in events:
                    seen.append(event)
                    if event["type"] == "agent_end":
                        break
    updates = [o for o in seen if o["type"] == "message_update"]
    assert updates
    for update in updates:
        assert list(update) == ["type", "assistantMessageEvent"]
        assert "partial" not in update["assistantMessageEvent"]
    assert _accumulate(seen) == {0: "".join(chunks)}
    end = [o for o in seen if o["type"] == "message_end"][-1]
    assert end["message"]["content"] == [{"type": "text", "text": "".join(chunks)}]
    assert end["message"]["role"] == "assistant"


async def test_the_client_option_needs_the_default_command() -> None:
    """``lean_updates`` with an explicit command is refused, saying what to do."""
    with pytest.raises(ValueError, match="put it in cmd"):
        async with open_rpc_client(["true"], lean_updates=True):
            pass
