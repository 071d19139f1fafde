"""Logs and OpenTelemetry spans of a prompt that is retried twice.

Needs ``trio-session[otel]`` and the OpenTelemetry SDK
(``pip install opentelemetry-sdk``).
Runs on Trio's virtual clock, so the 2 s and 4 s backoffs take no real time.
"""

from __future__ import annotations

import logging
import sys

import trio
import trio.testing
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from trio_session import FauxProvider, FauxReply, open_session

# The records' structured fields are LogRecord attributes: name them in
# the format.
handler = logging.StreamHandler(sys.stdout)
handler.setFormatter(
    logging.Formatter("%(levelname)-7s %(name)-20s %(message)s")
)
logging.getLogger("trio_session").addHandler(handler)
logging.getLogger("trio_session").setLevel(logging.INFO)

exporter = InMemorySpanExporter()
tracer_provider = TracerProvider()
tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))


async def main() -> None:
    script = [
        FauxReply(error="503 Service Unavailable"),
        FauxReply(error="503 Service Unavailable"),
        FauxReply(text="Hello!"),
    ]
    async with open_session(
        FauxProvider(script), tracer_provider=tracer_provider
    ) as session:
        await session.prompt("Hi")


SHOWN = (
    "trio_session.retry.attempts",
    "trio_session.retry.attempt",
    "trio_session.retry.delay_ms",
    "trio_session.stop_reason",
)


def show(span: ReadableSpan, depth: int, origin: int) -> None:
    assert span.start_time is not None
    assert span.end_time is not None
    start = (span.start_time - origin) / 1e9
    length = (span.end_time - span.start_time) / 1e9
    attributes = span.attributes or {}
    notes = " ".join(
        f"{k.rpartition('.')[2]}={attributes[k]!s}"
        for k in SHOWN
        if k in attributes
    )
    print(
        f"{'  ' * depth}{span.name:<22} "
        f"at {start:3.1f}s for {length:3.1f}s  {notes}"
    )


trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
print()
finished = sorted(
    exporter.get_finished_spans(),
    key=lambda s: (s.start_time or 0, s.parent is not None),
)
origin = finished[0].start_time or 0
for span in finished:
    show(span, 0 if span.parent is None else 1, origin)
