"""Issue 14: OpenTelemetry spans for prompt → attempts → backoff and compaction, on
virtual time, with the SDK's in-memory exporter; and nothing at all without the SDK."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import StatusCode

from trio_session import (
    DropOldestCompactor,
    FauxProvider,
    FauxReply,
    InMemoryCredentialStore,
    Model,
    ProviderRequest,
    Usage,
    open_session,
)

from .conftest import ERR_503, ERR_OVERFLOW, err, hang, ok

SECOND = 1_000_000_000  # ns


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    """Finished spans, in the order they ended."""
    exporter = InMemorySpanExporter()
    yield exporter
    exporter.shutdown()


@pytest.fixture
def tracer_provider(exporter: InMemorySpanExporter) -> TracerProvider:
    """A provider that exports every span to ``exporter`` as it ends."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def spans(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    """The finished spans called ``name``, in start order."""
    found = [s for s in exporter.get_finished_spans() if s.name == name]
    return sorted(found, key=lambda s: s.start_time or 0)


def duration(span: ReadableSpan) -> int:
    """The span's length in ns."""
    assert span.start_time is not None
    assert span.end_time is not None
    return span.end_time - span.start_time


def parent_id(span: ReadableSpan) -> int | None:
    """The span id of the span's parent, if it has one."""
    return span.parent.span_id if span.parent is not None else None


def span_id(span: ReadableSpan) -> int:
    """The span's own id."""
    assert span.context is not None
    ident: int = span.context.span_id
    return ident


async def run(
    script: Sequence[Any], tracer_provider: TracerProvider | None, **kwargs: Any
) -> FauxProvider:
    """Prompt once over ``script``."""
    provider = FauxProvider(script)
    async with open_session(
        provider, session_id="s-1", tracer_provider=tracer_provider, **kwargs
    ) as session:
        await session.prompt("hi")
    return provider


async def test_prompt_attempts_and_backoff_spans(
    autojump_clock: trio.testing.MockClock,
    tracer_provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    """[503, 503, ok]: one prompt span over three attempts and two backoffs of 2 s and 4 s."""
    app = tracer_provider.get_tracer("app")
    with app.start_as_current_span("request") as outer:
        await run([err(), err(), ok(usage=Usage(input=120, output=7))], tracer_provider)
    (prompt,) = spans(exporter, "trio_session.prompt")
    attempts = spans(exporter, "trio_session.attempt")
    backoffs = spans(exporter, "trio_session.backoff")
    # The application's current span is the prompt's parent; the rest hang off the prompt.
    assert parent_id(prompt) == outer.get_span_context().span_id
    assert {parent_id(s) for s in attempts + backoffs} == {span_id(prompt)}
    assert [s.name for s in sorted(attempts + backoffs, key=lambda s: s.start_time or 0)] == [
        "trio_session.attempt",
        "trio_session.backoff",
        "trio_session.attempt",
        "trio_session.backoff",
        "trio_session.attempt",
    ]
    assert [duration(s) for s in backoffs] == [2 * SECOND, 4 * SECOND]
    assert duration(prompt) == 6 * SECOND
    assert [dict(s.attributes or {}) for s in backoffs] == [
        {
            "gen_ai.system": "faux",
            "gen_ai.request.model": "faux-model",
            "trio_session.retry.attempt": attempt,
            "trio_session.retry.max_attempts": 3,
            "trio_session.retry.delay_ms": delay,
            "trio_session.retry.error": ERR_503,
            "trio_session.retry.cancelled": False,
        }
        for attempt, delay in ((1, 2000), (2, 4000))
    ]
    assert [s.status.status_code for s in backoffs] == [StatusCode.UNSET] * 2
    summary = [
        (
            a.attributes["trio_session.attempt"],
            a.attributes["trio_session.retry.attempt"],
            a.attributes["trio_session.stop_reason"],
            a.attributes.get("error.type"),
            a.status.status_code,
        )
        for a in attempts
        if a.attributes is not None
    ]
    assert summary == [
        (1, 0, "error", "retryable", StatusCode.ERROR),
        (2, 1, "error", "retryable", StatusCode.ERROR),
        (3, 2, "stop", None, StatusCode.UNSET),
    ]
    assert attempts[0].attributes is not None
    assert attempts[0].attributes["trio_session.error"] == ERR_503
    last = attempts[-1].attributes
    assert last is not None
    assert (last["gen_ai.usage.input_tokens"], last["gen_ai.usage.output_tokens"]) == (120, 7)
    assert dict(prompt.attributes or {}) == {
        "trio_session.session_id": "s-1",
        "gen_ai.system": "faux",
        "gen_ai.request.model": "faux-model",
        "trio_session.retry.attempts": 2,
        "trio_session.requests": 3,
        "trio_session.stop_reason": "stop",
    }
    assert prompt.status.status_code is StatusCode.UNSET


async def test_abort_retry_marks_the_backoff_cancelled(
    autojump_clock: trio.testing.MockClock,
    tracer_provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    """R-30: abort_retry() 0.5 s into the 2 s sleep ends the backoff span there, cancelled
    by "abort_retry" and not an error; the prompt, which returns the 503, likewise."""
    provider = FauxProvider([err(), ok()])
    async with (
        open_session(provider, tracer_provider=tracer_provider) as session,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(session.prompt, "hi")
        await trio.sleep(0.5)
        assert session.is_waiting_to_retry
        session.abort_retry()
    (backoff,) = spans(exporter, "trio_session.backoff")
    assert duration(backoff) == SECOND // 2
    assert backoff.attributes is not None
    assert backoff.attributes["trio_session.retry.cancelled"] is True
    assert cancel_of(backoff) == (StatusCode.UNSET, True, "abort_retry")
    assert "error.type" not in backoff.attributes
    (prompt,) = spans(exporter, "trio_session.prompt")
    assert prompt.attributes is not None
    assert prompt.attributes["trio_session.stop_reason"] == "error"  # the 503 stays (pi's too)
    assert prompt.attributes["trio_session.retry.attempts"] == 1
    assert cancel_of(prompt) == (StatusCode.UNSET, True, "abort_retry")
    assert len(spans(exporter, "trio_session.attempt")) == 1


def cancel_of(span: ReadableSpan) -> tuple[StatusCode, object, object]:
    """A span's status and what it says of a cancel: ``cancelled``, ``cancelled_by``."""
    attributes = span.attributes or {}
    return (
        span.status.status_code,
        attributes.get("trio_session.cancelled"),
        attributes.get("trio_session.cancelled_by"),
    )


async def test_caller_cancellation_ends_every_span(
    autojump_clock: trio.testing.MockClock,
    tracer_provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    """R-33: the caller's timeout during a re-attempt ends attempt and prompt, cancelled by
    "caller" — not errors; the prompt's stop reason is "aborted", as pi settles it."""
    provider = FauxProvider([err(), hang()])
    async with open_session(provider, tracer_provider=tracer_provider) as session:
        with trio.move_on_after(3):
            await session.prompt("hi")
    assert session.is_running is False
    first, second = spans(exporter, "trio_session.attempt")
    assert second.attributes is not None
    assert second.attributes["trio_session.stop_reason"] == "aborted"
    assert cancel_of(second) == (StatusCode.UNSET, True, "caller")
    assert duration(second) == SECOND  # from t = 2 to the timeout at t = 3
    assert cancel_of(first) == (StatusCode.ERROR, None, None)  # the 503: a real failure
    (prompt,) = spans(exporter, "trio_session.prompt")
    assert duration(prompt) == 3 * SECOND
    assert prompt.attributes is not None
    assert prompt.attributes["trio_session.stop_reason"] == "aborted"
    assert cancel_of(prompt) == (StatusCode.UNSET, True, "caller")
    assert "error.type" not in prompt.attributes
    assert all(s.end_time is not None for s in exporter.get_finished_spans())
    assert len(exporter.get_finished_spans()) == 4  # prompt, 2 attempts, 1 backoff


async def test_abort_in_the_backoff_is_an_aborted_prompt_not_an_error(
    autojump_clock: trio.testing.MockClock,
    tracer_provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    """abort() 1 s into the 2 s backoff: the backoff and the prompt end there, cancelled
    by "abort", status unset; the prompt's stop reason is "aborted" (pi 1.6.0 settles the
    run with aborted: true), not the 503's "error"."""
    async with (
        open_session(FauxProvider([err(), ok()]), tracer_provider=tracer_provider) as session,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(session.prompt, "hi")
        await trio.sleep(1)
        assert session.is_waiting_to_retry
        await session.abort()
    (backoff,) = spans(exporter, "trio_session.backoff")
    assert duration(backoff) == SECOND
    assert cancel_of(backoff) == (StatusCode.UNSET, True, "abort")
    (prompt,) = spans(exporter, "trio_session.prompt")
    assert duration(prompt) == SECOND
    assert prompt.attributes is not None
    assert prompt.attributes["trio_session.stop_reason"] == "aborted"
    assert cancel_of(prompt) == (StatusCode.UNSET, True, "abort")
    (attempt,) = spans(exporter, "trio_session.attempt")
    assert cancel_of(attempt) == (StatusCode.ERROR, None, None)  # the 503 itself


@pytest.mark.parametrize(
    ("who", "script"),
    [
        ("abort", [hang()]),
        ("abort", [err(), hang()]),  # abort() cuts the re-attempt (abort_retry() first)
        ("abort_retry", [err(), hang()]),
        ("caller", [hang()]),
    ],
    ids=["abort-first-request", "abort-reattempt", "abort_retry-reattempt", "caller"],
)
async def test_a_request_cut_short_says_who_cut_it(
    autojump_clock: trio.testing.MockClock,
    tracer_provider: TracerProvider,
    exporter: InMemorySpanExporter,
    who: str,
    script: list[FauxReply],
) -> None:
    """A request streaming when abort(), abort_retry() or the caller's cancel comes: its
    attempt and the prompt end cancelled by that one, neither an error."""
    async with open_session(FauxProvider(script), tracer_provider=tracer_provider) as session:
        if who == "caller":
            with trio.move_on_after(2.5):
                await session.prompt("hi")
        else:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(session.prompt, "hi")
                await trio.sleep(2.5)  # in the re-attempt (from t = 2), or the first one
                assert session.is_running
                if who == "abort":
                    await session.abort()
                else:
                    session.abort_retry()
    last = spans(exporter, "trio_session.attempt")[-1]
    assert last.attributes is not None
    assert last.attributes["trio_session.stop_reason"] == "aborted"
    assert cancel_of(last) == (StatusCode.UNSET, True, who)
    (prompt,) = spans(exporter, "trio_session.prompt")
    assert cancel_of(prompt) == (StatusCode.UNSET, True, who)
    assert prompt.attributes is not None
    assert prompt.attributes["trio_session.stop_reason"] == "aborted"
    assert duration(prompt) == 5 * SECOND // 2


async def test_a_stream_left_early_is_cancelled_by_its_caller(
    autojump_clock: trio.testing.MockClock,
    tracer_provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    """A ``stream()`` block left at its first text (a websocket client gone): the
    prompt is cancelled by "caller", status unset."""
    async with (
        open_session(FauxProvider([hang()]), tracer_provider=tracer_provider) as session,
        session.stream("hi") as reply,
    ):
        async for _ in reply.items():
            break
    (prompt,) = spans(exporter, "trio_session.prompt")
    assert cancel_of(prompt) == (StatusCode.UNSET, True, "caller")


async def test_among_many_cancelled_prompts_only_the_real_failure_is_an_error(
    autojump_clock: trio.testing.MockClock,
    tracer_provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    """Twenty prompts cancelled by their callers (ten mid-request, ten in a backoff) and
    one that fails for good (a 401): exactly one prompt span has status ERROR."""
    script = [hang()] * 10 + [err()] * 10 + [err("401 Unauthorized: invalid key")]
    async with open_session(FauxProvider(script), tracer_provider=tracer_provider) as session:
        for _ in range(20):  # cancelled at t + 1: in the request, then in the 2 s backoff
            with trio.move_on_after(1):
                await session.prompt("hi")
        with trio.fail_after(10):
            await session.prompt("hi")
    prompts = spans(exporter, "trio_session.prompt")
    assert len(prompts) == 21
    statuses = [p.status.status_code for p in prompts]
    assert statuses == [StatusCode.UNSET] * 20 + [StatusCode.ERROR]
    assert [cancel_of(p)[2] for p in prompts] == ["caller"] * 20 + [None]
    assert prompts[-1].attributes is not None
    assert prompts[-1].attributes["error.type"] == "fatal"


MODEL = Model(id="small", provider="faux", context_window=1000)


async def test_compaction_span(
    autojump_clock: trio.testing.MockClock,
    tracer_provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    """R-50: an overflow's compaction is a child of the prompt, with reason and tokens."""
    provider = FauxProvider([ok("a1"), err(ERR_OVERFLOW), ok("a2")])
    async with open_session(
        provider, MODEL, compactor=DropOldestCompactor(), tracer_provider=tracer_provider
    ) as session:
        await session.prompt("q1")
        await session.prompt("q2")
    prompts = spans(exporter, "trio_session.prompt")
    (compaction,) = spans(exporter, "trio_session.compaction")
    assert parent_id(compaction) == span_id(prompts[1])
    attributes = dict(compaction.attributes or {})
    assert attributes["trio_session.compaction.reason"] == "overflow"
    assert attributes["trio_session.compaction.aborted"] is False
    assert attributes["trio_session.compaction.will_retry"] is True
    before = attributes["trio_session.compaction.tokens_before"]
    after = attributes["trio_session.compaction.tokens_after"]
    assert isinstance(before, int)
    assert isinstance(after, int)
    assert 0 < after < before
    overflow = spans(exporter, "trio_session.attempt")[1].attributes
    assert overflow is not None
    assert overflow["error.type"] == "overflow"


async def test_manual_compaction_hangs_off_the_current_span(
    autojump_clock: trio.testing.MockClock,
    tracer_provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    """Outside a prompt the compaction span's parent is the caller's current span."""
    provider = FauxProvider([ok("a1"), ok("a2")])
    async with open_session(
        provider, MODEL, compactor=DropOldestCompactor(), tracer_provider=tracer_provider
    ) as session:
        await session.prompt("q1")
        await session.prompt("q2")
        with tracer_provider.get_tracer("app").start_as_current_span("compact") as outer:
            await session.compact()
    (compaction,) = spans(exporter, "trio_session.compaction")
    assert parent_id(compaction) == outer.get_span_context().span_id
    assert compaction.attributes is not None
    assert compaction.attributes["trio_session.compaction.reason"] == "manual"


def _echo_key(request: ProviderRequest) -> FauxReply:
    return err(f"503 rejected key {request.api_key}")


async def test_no_key_in_any_span(
    autojump_clock: trio.testing.MockClock,
    tracer_provider: TracerProvider,
    exporter: InMemorySpanExporter,
) -> None:
    """A key the provider echoes in its error is in no attribute or status of any span."""
    secret = "sk-ant-0123456789abcdefSECRET"
    store = InMemoryCredentialStore(keys={"faux": [secret]}, clock=trio.current_time)
    await run([_echo_key, ok()], tracer_provider, credentials=store)
    finished = exporter.get_finished_spans()
    assert len(finished) == 4
    for span in finished:
        assert secret not in repr(dict(span.attributes or {}))
        assert secret not in (span.status.description or "")
    (backoff,) = spans(exporter, "trio_session.backoff")
    assert backoff.attributes is not None
    assert backoff.attributes["trio_session.retry.error"] == "503 rejected key sk-…CRET"


async def test_tracing_uses_the_global_provider_by_default(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Without tracer_provider the session asks OpenTelemetry's global one (a no-op here)."""
    assert not isinstance(trace.get_tracer_provider(), TracerProvider)
    await run([ok()], None)


async def test_a_provider_installed_later_records_the_next_prompt(
    tracer_provider: TracerProvider,
    exporter: InMemorySpanExporter,
    monkeypatch: pytest.MonkeyPatch,
    autojump_clock: trio.testing.MockClock,
) -> None:
    """With only the API, a prompt makes no span at all (nothing would record it); a
    provider installed globally afterwards records the same session's next prompt, and
    a prompt inside an application's span still sees that span as current."""
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    provider = FauxProvider([ok("one"), ok("two")])
    async with open_session(provider, session_id="s-1") as session:
        await session.prompt("hi")
        assert exporter.get_finished_spans() == ()
        # as trace.set_tracer_provider would, but undone after the test
        monkeypatch.setattr(trace, "_TRACER_PROVIDER", tracer_provider)
        outer = tracer_provider.get_tracer("app").start_span("app")
        with trace.use_span(outer, end_on_exit=True):
            await session.prompt("again")
    (prompt,) = spans(exporter, "trio_session.prompt")
    assert prompt.attributes is not None
    assert prompt.attributes["trio_session.session_id"] == "s-1"
    assert parent_id(prompt) == span_id(spans(exporter, "app")[0])
    assert len(spans(exporter, "trio_session.attempt")) == 1


HIDDEN = textwrap.dedent(
    """
    import sys
    sys.modules["opentelemetry"] = None  # as if trio-session[otel] were not installed
    import trio
    import trio_session._observe.tracing as tracing
    from trio_session import FauxProvider, FauxReply, open_session

    assert tracing.AVAILABLE is False

    def refuse(*args, **kwargs):
        raise AssertionError("span code ran")

    for name in ("prompt", "on_event", "_start", "_finish_prompt"):
        setattr(tracing.SessionTracer, name, refuse)

    async def main():
        script = [FauxReply(error="503 Service Unavailable"), FauxReply(text="fine")]
        settings = {"retry": {"baseDelayMs": 1}}
        async with open_session(FauxProvider(script), settings=settings) as session:
            assert session._observer._tracer is None
            reply = await session.prompt("hi")
        print(reply.text, session.retry_attempt)

    trio.run(main)
    print(sorted(m for m in sys.modules if m.startswith("opentelemetry")))
    """
)


def test_without_opentelemetry_no_span_code_runs() -> None:
    """With opentelemetry not importable, a retried prompt works and no span code runs."""
    env = {**os.environ, "PYTHONWARNINGS": "error"}
    result = subprocess.run(
        [sys.executable, "-c", HIDDEN], capture_output=True, text=True, env=env, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["fine 0", "['opentelemetry']"]


NAMED = textwrap.dedent(
    """
    import os, sys
    import trio
    from trio_session import FauxProvider, FauxReply, open_session

    async def main():
        provider = FauxProvider([FauxReply(text="one"), FauxReply(text="two")])
        async with open_session(provider) as session:
            first = await session.prompt("hi")
            print("opentelemetry.trace" in sys.modules)
            os.environ.pop("OTEL_PYTHON_TRACER_PROVIDER", None)  # read once: still named
            second = await session.prompt("again")
        print(first.text)
        print(second.text)

    trio.run(main)
    """
)


@pytest.mark.parametrize("named", [None, "sdk_tracer_provider", "no_such_provider"])
def test_a_provider_named_in_the_environment_is_asked_for(named: str | None) -> None:
    """OpenTelemetry installed but never imported: a prompt imports it only when
    ``OTEL_PYTHON_TRACER_PROVIDER`` names a provider (read at the first prompt). A name
    that does not load (OpenTelemetry raises, after logging why) costs no prompt."""
    env = {k: v for k, v in os.environ.items() if k != "OTEL_PYTHON_TRACER_PROVIDER"}
    if named is not None:
        env["OTEL_PYTHON_TRACER_PROVIDER"] = named
    result = subprocess.run(
        [sys.executable, "-c", NAMED], capture_output=True, text=True, env=env, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [str(named is not None), "one", "two"]
    assert result.stderr.count("Failed to load configured provider") == (
        1 if named == "no_such_provider" else 0
    )


def test_observe_example_prints_the_story() -> None:
    """docs/examples/observe.py: the retry lines, then prompt → attempts → backoffs."""
    example = Path(__file__).parent.parent / "docs" / "examples" / "observe.py"
    out = subprocess.run(
        [sys.executable, str(example)], capture_output=True, text=True, timeout=60, check=True
    ).stdout.splitlines()
    assert [line.split()[1] for line in out[:5]] == [
        "trio_session.provider",
        "trio_session.retry",
        "trio_session.provider",
        "trio_session.retry",
        "trio_session.retry",
    ]
    assert [" ".join(line.split()) for line in out[6:]] == [
        "trio_session.prompt at 0.0s for 6.0s attempts=2 stop_reason=stop",
        "trio_session.attempt at 0.0s for 0.0s attempt=0 stop_reason=error",
        "trio_session.backoff at 0.0s for 2.0s attempt=1 delay_ms=2000",
        "trio_session.attempt at 2.0s for 0.0s attempt=1 stop_reason=error",
        "trio_session.backoff at 2.0s for 4.0s attempt=2 delay_ms=4000",
        "trio_session.attempt at 6.0s for 0.0s attempt=2 stop_reason=stop",
    ]


class _Counting(trace.TracerProvider):
    """A tracer provider that records the names of the spans asked of it."""

    def __init__(self, inner: trace.TracerProvider) -> None:
        self.inner = inner
        self.started: list[str] = []

    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return _CountingTracer(self, self.inner.get_tracer(*args, **kwargs))


class _CountingTracer(trace.Tracer):
    def __init__(self, owner: _Counting, inner: trace.Tracer) -> None:
        self.owner = owner
        self.inner = inner

    def start_span(self, name: str, *args: Any, **kwargs: Any) -> trace.Span:
        self.owner.started.append(name)
        return self.inner.start_span(name, *args, **kwargs)

    def start_as_current_span(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover
        raise NotImplementedError


@pytest.mark.parametrize(
    "inner",
    [trace.NoOpTracerProvider(), TracerProvider(sampler=ALWAYS_OFF)],
    ids=["api-only", "sampled-out"],
)
async def test_an_unrecorded_prompt_makes_no_child_spans(
    inner: trace.TracerProvider, autojump_clock: trio.testing.MockClock
) -> None:
    """Issue 15: with OpenTelemetry's API but nothing recording (no SDK, or a sampler
    that drops the prompt), a prompt with a retry asks for its own span only — no
    attempt or backoff span per event — and still runs as before."""
    counting = _Counting(inner)
    provider = FauxProvider([err(ERR_503), ok("done")])
    async with open_session(provider, tracer_provider=counting) as session:
        reply = await session.prompt("hi")
    assert reply.text == "done"
    assert trio.current_time() == 2.0  # one retry after baseDelayMs = 2 000
    assert counting.started == ["trio_session.prompt"]


async def test_a_recorded_prompt_still_asks_for_every_span(
    tracer_provider: TracerProvider, autojump_clock: trio.testing.MockClock
) -> None:
    """The counterpart: a recorded prompt with one retry asks for its attempts and backoff."""
    counting = _Counting(tracer_provider)
    provider = FauxProvider([err(ERR_503), ok("done")])
    async with open_session(provider, tracer_provider=counting) as session:
        await session.prompt("hi")
    assert counting.started == [
        "trio_session.prompt",
        "trio_session.attempt",
        "trio_session.backoff",
        "trio_session.attempt",
    ]
