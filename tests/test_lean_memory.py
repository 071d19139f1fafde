"""Issue 15: a session waiting in its backoff holds few objects — and what is shared
between sessions to get there stays immutable, and what is made on first use behaves
as the eager version did."""

from __future__ import annotations

import gc

import attrs
import pytest
import trio
import trio.testing
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from trio_session import (
    AssistantMessage,
    FauxProvider,
    FauxReply,
    Model,
    ModelCost,
    SettingsError,
    SettingsStore,
    Usage,
    open_session,
)
from trio_session._core.messages import ZERO_COST, ZERO_USAGE, Cost
from trio_session.providers._base import FREE

from .conftest import ERR_503, err, hang, ok


def test_shared_zero_values_are_frozen_and_equal_to_fresh_ones() -> None:
    """The zero usage, cost and prices every default shares cannot be changed, and
    compare equal to ones made afresh (so sharing them changes no value)."""
    for shared, fresh, field in (
        (ZERO_USAGE, Usage(), "input"),
        (ZERO_COST, Cost(), "total"),
        (FREE, ModelCost(), "input"),
    ):
        assert shared == fresh
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            setattr(shared, field, 1)
    assert AssistantMessage().usage is ZERO_USAGE
    assert Usage(input=5).cost is ZERO_COST
    assert Model(id="m", provider="p").cost is FREE


def test_pricing_a_free_usage_keeps_it_and_a_priced_one_is_computed() -> None:
    """``Model.priced``: free prices leave the usage as it is; real prices make a new
    cost (the shared zero is never what a priced usage carries)."""
    free = Model(id="m", provider="p")
    usage = Usage(input=1_000_000, output=2_000_000)
    assert free.priced(usage) is usage
    paid = Model(id="m", provider="p", cost=ModelCost(input=3.0, output=15.0))
    priced = paid.priced(usage)
    assert priced.cost == Cost(input=3.0, output=30.0, total=33.0)
    assert usage.cost is ZERO_COST  # the original is untouched


def test_equal_settings_are_shared_until_one_store_changes() -> None:
    """Two stores made from equal mappings share one resolved ``Settings``; a change to
    one store is its own; ``1000.0`` is not taken for a cached ``1000``."""
    first = SettingsStore.coerce({"retry": {"baseDelayMs": 1000}})
    second = SettingsStore.coerce({"retry": {"baseDelayMs": 1000}})
    assert first.current is second.current
    assert first.layers[0] is second.layers[0]  # one validated layer, frozen
    first.set("retry.enabled", False)
    assert first.current.retry.enabled is False
    assert second.current.retry.enabled is True
    assert second.current.retry.base_delay_ms == 1000
    other = SettingsStore.coerce({"compaction": {"reserveTokens": 1}})
    assert other.current is not first.current
    # 1000.0 == 1000 (and hashes alike), but it is not an integer: still refused.
    with pytest.raises(SettingsError, match=r"retry\.baseDelayMs must be an integer"):
        SettingsStore.coerce({"retry": {"baseDelayMs": 1000.0}})


async def test_a_session_in_backoff_keeps_no_lists_it_does_not_use(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Without subscribers, streams or joined prompts a session in backoff holds none
    of their lists; subscribing and streaming afterwards work as before."""
    async with open_session(FauxProvider([err(ERR_503), ok("done")])) as session:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "hi")
            await trio.testing.wait_all_tasks_blocked()
            assert session.is_waiting_to_retry
            assert session._subscribers is None
            assert session._streams is None
            assert session._joined is None
            seen: list[str] = []
            unsubscribe = session.subscribe(lambda event: seen.append(event.type))
            with session.events() as events:
                assert session.retry_now()
                async for event in events:
                    if event.type == "auto_retry_end":
                        break
            unsubscribe()
            unsubscribe()  # safe twice
        assert seen.count("auto_retry_end") == 1
        assert session._streams == []
        assert session.history[-1].text == "done"


async def test_a_session_in_backoff_holds_no_tracer_when_nothing_records(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """OpenTelemetry's API with nothing recording: the session keeps no tracer object
    through its backoff; the observer's key set is the shared empty one."""
    async with (
        open_session(
            FauxProvider([err(ERR_503), ok()]), tracer_provider=trace.NoOpTracerProvider()
        ) as session,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(session.prompt, "hi")
        await trio.testing.wait_all_tasks_blocked()
        assert session.is_waiting_to_retry
        tracer = session._observer._tracer
        assert tracer is not None
        assert tracer._tracer is None
        assert session._observer.secrets == frozenset()
        await session.abort()


async def test_a_session_makes_no_tracer_until_something_records(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """With OpenTelemetry importable but no tracer provider given or installed, a
    session keeps no tracer at all, through a prompt and its backoff; given a recording
    provider later (as ``tracer_provider``), the first prompt makes one and records."""
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    async with (
        open_session(FauxProvider([err(ERR_503), ok()])) as session,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(session.prompt, "hi")
        await trio.testing.wait_all_tasks_blocked()
        assert session.is_waiting_to_retry
        assert session._observer._tracer is None
        await session.abort()
    assert session._observer._tracer is None
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    async with open_session(FauxProvider([ok()]), tracer_provider=provider) as session:
        assert session._observer._tracer is None
        await session.prompt("hi")
        assert session._observer._tracer is not None
    assert [span.name for span in exporter.get_finished_spans()] == [
        "trio_session.attempt",
        "trio_session.prompt",
    ]


async def test_a_key_seen_later_is_scrubbed_from_spans(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The tracer shares the observer's key set from the first key on: an error that
    echoes a key the session saw only after it was made shows no key in its span."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    secret = "sk-seen-after-start-SECRET"
    async with open_session(
        FauxProvider([err(f"503 rejected key {secret}"), ok()]), tracer_provider=provider
    ) as session:
        assert not isinstance(session._observer.secrets, set)
        session._observer.saw_key(secret)
        await session.prompt("hi")
    (backoff,) = [s for s in exporter.get_finished_spans() if s.name == "trio_session.backoff"]
    assert backoff.attributes is not None
    assert secret not in str(backoff.attributes["trio_session.retry.error"])
    exporter.shutdown()


async def test_abort_while_the_reattempt_streams_ends_the_prompt_span_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Once a chain runs, the nursery's scope is the run: ``abort()`` during the
    re-attempt cancels it, the prompt returns aborted with one ``auto_retry_end``, and
    the prompt span still ends cancelled."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    ends: list[bool] = []
    async with open_session(
        FauxProvider([err(ERR_503), hang()]), tracer_provider=provider
    ) as session:
        session.subscribe(
            lambda event: ends.append(event.success) if event.type == "auto_retry_end" else None
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "hi")
            await trio.sleep(3)  # the 2 s backoff is over; the re-attempt hangs
            assert session.is_retrying
            assert not session.is_waiting_to_retry
            await session.abort()
            assert not session.is_running
        assert trio.current_time() == 3.0
    assert ends == [False]
    last = session.history[-1]
    assert isinstance(last, AssistantMessage)
    assert last.stop_reason == "aborted"
    (prompt,) = [s for s in exporter.get_finished_spans() if s.name == "trio_session.prompt"]
    assert prompt.attributes is not None
    assert prompt.attributes["trio_session.cancelled"] is True
    exporter.shutdown()


async def test_gc_tracked_objects_per_session_in_backoff(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The census of issue 15: a session in backoff (open_session + prompt, default
    settings, OpenTelemetry's API without an SDK) adds at most 90 objects the cyclic
    collector tracks (81 measured; 125 before this work; the raw floor — a task, its
    nursery, a child in a cancel scope sleeping — 45)."""
    n = 50

    async def one() -> None:
        script = [FauxReply(error="503 Service Unavailable"), FauxReply(text="never")]
        async with open_session(FauxProvider(script)) as session:
            await session.prompt("hi")

    async with trio.open_nursery() as nursery:
        gc.collect()
        before = len(gc.get_objects())
        for _ in range(n):
            nursery.start_soon(one)
        await trio.testing.wait_all_tasks_blocked()
        gc.collect()
        per_session = (len(gc.get_objects()) - before) / n
        nursery.cancel_scope.cancel()
    assert per_session <= 90, per_session
