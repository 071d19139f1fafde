"""Issue 15: the cheap mechanisms behind abort, backoff and a first-try turn behave as the
expensive ones did — one end per chain, the prompt span cancelled, the same requests, the
same classification, no log record nobody takes, nothing kept alive by a cycle."""

from __future__ import annotations

import gc
import logging
import weakref
from collections.abc import Iterator

import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from trio_session import (
    AssistantMessage,
    AutoRetryEnd,
    AutoRetryStart,
    FauxProvider,
    UserMessage,
    open_session,
)
from trio_session._agent.loop import _RequestCache, request_messages
from trio_session._core.messages import BashExecutionMessage
from trio_session._observe.log_records import known_secrets
from trio_session._retry.classify import (
    PI_1_6_CLASSIFIER,
    REFERENCE_CLASSIFIER,
    STRICT_CLASSIFIER,
    PatternClassifier,
)
from trio_session.testing import EventRecorder

from .conftest import ERR_503, assert_idle, check_retry_events, err, ok, retry_settings


async def test_abort_in_backoff_ends_the_chain_once_and_the_prompt_with_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-30, R-32, R-35: abort() 1 s into the 2 s backoff: one auto_retry_end "Retry
    cancelled", emitted before prompt() returns the error, both at t = 1, nothing left."""
    async with open_session(FauxProvider([err(), ok()])) as session:
        rec = EventRecorder.attach(session)
        order: list[str] = []
        returned: list[AssistantMessage] = []

        async def prompt() -> None:
            returned.append(await session.prompt("Hi"))
            order.append(f"prompt returned, {len(rec.of(AutoRetryEnd))} end(s)")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(prompt)
            await trio.sleep(1)
            assert session.is_waiting_to_retry
            await session.abort()
            order.append("abort returned")
            assert trio.current_time() == 1.0
        assert_idle(session)
    assert order == ["prompt returned, 1 end(s)", "abort returned"]
    assert check_retry_events(rec.events) == 1
    (end,) = rec.of(AutoRetryEnd)
    assert (end.success, end.attempt, end.final_error) == (False, 1, "Retry cancelled")
    assert returned[0].error_message == ERR_503
    assert [m.role for m in session.history] == ["user", "assistant"]


async def test_abort_after_retry_now_before_the_reattempt_ends_the_chain(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-34a, R-32: abort() right after retry_now() (the sleep cut, the re-attempt not
    yet sent) ends the chain: one end, "Retry cancelled", and no second request."""
    provider = FauxProvider([err(), ok()])
    async with open_session(provider) as session:
        rec = EventRecorder.attach(session)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "Hi")
            await trio.sleep(1)
            assert session.retry_now()
            await session.abort()
        assert_idle(session)
    assert [e.final_error for e in rec.of(AutoRetryEnd)] == ["Retry cancelled"]
    assert len(rec.of(AutoRetryStart)) == 1
    assert len(provider.requests) == 1


async def test_abort_in_backoff_still_ends_the_prompt_span_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """abort() in backoff ends only the chain, yet the prompt span says cancelled."""
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        provider = FauxProvider([err(), ok()])
        async with (
            open_session(provider, tracer_provider=tracer_provider) as session,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(session.prompt, "Hi")
            await trio.sleep(1)
            await session.abort()
        (prompt,) = [s for s in exporter.get_finished_spans() if s.name == "trio_session.prompt"]
        assert prompt.attributes is not None
        assert prompt.attributes["trio_session.cancelled"] is True
        assert prompt.attributes["trio_session.cancelled_by"] == "abort"
        assert "error.type" not in prompt.attributes  # a cancel is not an error
    finally:
        exporter.shutdown()


async def test_waiting_lots_are_made_on_first_use(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """wait_for_retry_end() and abort() still wake up although a session makes their
    parking lots only when someone first waits."""
    async with open_session(FauxProvider([err(), err(), ok()])) as session:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "Hi")
            await trio.sleep(1)
            session.abort_retry()
            await session.wait_for_retry_end()
            assert not session.is_retrying
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "again")
            await trio.sleep(1)
            await session.abort()
            await session.abort()  # idle: returns at once
        assert_idle(session)
        assert trio.current_time() == 2.0


async def test_an_aborted_session_and_its_observer_are_freed_by_reference_counting(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """With the collector off, the observer (and its tracer) go with the session: no
    cycle between them."""
    gc.collect()
    gc.disable()
    try:
        async with (
            open_session(FauxProvider([err(), ok()])) as session,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(session.prompt, "Hi")
            await trio.sleep(1)
            await session.abort()
        observer = weakref.ref(session._observer)
        del session
        assert observer() is None
    finally:
        gc.enable()


async def test_known_keys_are_forgotten_when_their_session_is_freed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A key stays scrubbed while a session that saw it lives, and only then."""
    async with open_session(FauxProvider([ok()])) as first:
        first._observer.saw_key("sk-first-secret")
        async with open_session(FauxProvider([ok()])) as second:
            second._observer.saw_key("sk-first-secret")
            second._observer.saw_key("sk-second-secret")
            assert {"sk-first-secret", "sk-second-secret"} <= known_secrets()
        del second
        gc.collect()
        assert "sk-second-secret" not in known_secrets()
        assert "sk-first-secret" in known_secrets()
    del first
    gc.collect()
    assert "sk-first-secret" not in known_secrets()


@pytest.fixture
def records_made() -> Iterator[list[logging.LogRecord]]:
    """Every ``trio_session`` log record made while the test runs."""
    made: list[logging.LogRecord] = []
    factory = logging.getLogRecordFactory()

    def counting(*args: object, **kwargs: object) -> logging.LogRecord:
        record = factory(*args, **kwargs)
        if record.name.startswith("trio_session"):
            made.append(record)
        return record

    logging.setLogRecordFactory(counting)
    try:
        yield made
    finally:
        logging.setLogRecordFactory(factory)


async def _abort_in_backoff() -> None:
    async with (
        open_session(FauxProvider([err(), ok()])) as session,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(session.prompt, "Hi")
        await trio.sleep(1)
        await session.abort()


async def test_no_record_is_made_that_no_handler_takes(
    autojump_clock: trio.testing.MockClock,
    records_made: list[logging.LogRecord],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With only the library's NullHandlers (logging not configured), the provider
    failure and the cancelled retry make no record at all."""
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    await _abort_in_backoff()
    assert records_made == []


async def test_a_handler_anywhere_up_the_tree_still_gets_every_record(
    autojump_clock: trio.testing.MockClock,
    records_made: list[logging.LogRecord],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A handler on ``trio_session`` (not on the child loggers) gets the provider
    failure, the retry's start and its cancelled end (all INFO since issue 31)."""
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    got: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            got.append(record)

    handler = Keep()
    parent = logging.getLogger("trio_session")
    parent.addHandler(handler)
    level = parent.level
    parent.setLevel(logging.INFO)
    try:
        await _abort_in_backoff()
    finally:
        parent.removeHandler(handler)
        parent.setLevel(level)
    assert [(r.name, r.levelname, r.msg) for r in got] == [
        ("trio_session.provider", "INFO", "provider request failed (%s): %s"),
        ("trio_session.retry", "INFO", "retry %d/%d in %d ms after: %s"),
        ("trio_session.retry", "INFO", "retry cancelled after %d attempt(s)"),
    ]
    assert len(records_made) == 3


# -- the overflow alternation and the request cache ---------------------------------------

FRAGMENTS = [
    "prompt is too long",
    "Input is too long for requested model",
    "exceeds the context window",
    "input token count 9 exceeds the maximum",
    "maximum prompt length is 12",
    "maximum context length is 8 tokens",
    "exceeds the limit of 5",
    "CONTEXT_LENGTH_EXCEEDED",
    "too many tokens",
    "Token limit exceeded",
    "request_too_large",
    "per minute",
    "429",
    "400 status code (no body)",
    "too large for model with 7 maximum context length",
    "context",
    "exceeds the",
    "\n",
    " ",
    "x",
]


@settings(deadline=None)
@given(
    st.lists(st.sampled_from(FRAGMENTS), max_size=6),
    st.sampled_from([REFERENCE_CLASSIFIER, PI_1_6_CLASSIFIER, STRICT_CLASSIFIER]),
)
def test_the_overflow_alternation_matches_as_the_patterns_one_by_one(
    parts: list[str], classifier: PatternClassifier
) -> None:
    """R-7: one search of the combined shipped patterns says what one search each said."""
    text = "".join(parts)
    assert classifier._overflows(text) == any(p.search(text) for p in classifier.overflow)
    message = AssistantMessage(content=(), stop_reason="error", error_message=text)
    assert classifier.is_context_overflow(message) == _overflow_one_by_one(
        classifier, message.error_message or ""
    )


def _overflow_one_by_one(classifier: PatternClassifier, text: str) -> bool:
    if not text:
        return False
    veto = classifier.not_overflow
    if veto is not None and veto.search(text):
        return False
    bodyless = classifier.bodyless_overflow
    if bodyless is not None and classifier.bodyless_providers is None and bodyless.search(text):
        return True
    return any(p.search(text) for p in classifier.overflow)


_POOL = [
    UserMessage.of("a"),
    UserMessage.of("b"),
    AssistantMessage(content=(), stop_reason="stop"),
    AssistantMessage(content=(), stop_reason="error", error_message=ERR_503),
    AssistantMessage(content=(), stop_reason="aborted", error_message="x"),
    BashExecutionMessage(command="ls", output="out", exit_code=0),
    BashExecutionMessage(command="ls", output="out", exit_code=0, exclude_from_context=True),
]

_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(0, len(_POOL) - 1)),
        st.tuples(st.just("pop"), st.just(0)),
        st.tuples(st.just("replace"), st.integers(0, len(_POOL) - 1)),
        st.tuples(st.just("truncate"), st.integers(0, 5)),
        st.tuples(st.just("request"), st.just(0)),
    ),
    max_size=30,
)


@settings(deadline=None)
@given(_OPS)
def test_the_request_cache_sends_what_request_messages_sends(
    ops: list[tuple[str, int]],
) -> None:
    """R-20a: whatever happens to the context between requests (appends, a dropped
    failure, compaction-like rewrites), the cached conversion equals a fresh one."""
    cache = _RequestCache()
    messages: list[object] = []
    for op, arg in ops:
        if op == "append":
            messages.append(_POOL[arg])
        elif op == "pop" and messages:
            messages.pop()
        elif op == "replace" and messages:
            messages[len(messages) // 2] = _POOL[arg]
        elif op == "truncate":
            del messages[arg:]
        assert cache.of(messages) == request_messages(messages)  # type: ignore[arg-type]


async def test_a_session_sends_the_context_without_retried_errors(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-20a: after a retried error and a later turn, each request is the context
    without failed messages, as a fresh conversion gives it."""
    provider = FauxProvider([err(), ok("one"), ok("two")])
    async with open_session(provider, settings=retry_settings(baseDelayMs=10)) as session:
        await session.prompt("first")
        await session.prompt("second")
    sent = [[m.role for m in r.messages] for r in provider.requests]
    assert sent == [
        ["user"],
        ["user"],
        ["user", "assistant", "user"],
    ]
