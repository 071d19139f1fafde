"""What the retry machinery costs when nothing fails, and how many events go through.

Run from the repository root::

    python benchmarks/overhead.py            # writes benchmarks/results/overhead.json
    python benchmarks/overhead.py --quick

1. **Turn overhead.** A turn that succeeds at once, through ``session.prompt()``
   versus through a bare ``Agent(provider, model, emit=lambda e: None).prompt()``
   — the same agent loop without the session around it (no run scope, nursery,
   retry decision, settle, history). Both use a ``FauxProvider`` with zero delay;
   the script is extended with ``provider.extend([...])`` before each turn. The
   context grows by two messages per turn, so each batch of turns starts from a
   fresh session / agent; batches of the two kinds alternate. Reported: median
   time per turn, the difference, and the overhead ratio.
2. **Events per second.** One streamed reply of K chunks (``FauxReply(chunks=…)``,
   each chunk one ``message_update``), counted by a ``subscribe()`` callback, by a
   task iterating ``session.events()``, and — as the baseline — by the bare
   agent's ``emit``. Reported per K, since the cost per chunk grows with the
   length of the message already streamed.
3. With ``--shapes``: the bare agent turn wrapped in the scopes ``prompt()`` adds —
   a cancel scope, the unwrap context manager, a nursery, the shielded scope of its
   ``finally`` — without any session code, to tell structure from library code.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import trio
from _bench import machine_info, percentile, unit_f_ns, write_json

from trio_session import Agent, AgentEnd, FauxProvider, FauxReply, Model, SessionEvent, open_session

MODEL = Model(id="faux-model", provider="faux")
REPLY = FauxReply(text="Hello!")


def _ignore(event: SessionEvent) -> None:
    pass


async def session_turns(turns: int) -> list[int]:
    """Per-turn ns of ``session.prompt()`` on a fresh session, ``turns`` times."""
    provider = FauxProvider([])
    times = []
    async with open_session(provider) as session:
        for _ in range(turns):
            provider.extend([REPLY])
            start = time.perf_counter_ns()
            await session.prompt("hi")
            times.append(time.perf_counter_ns() - start)
    return times


async def agent_turns(turns: int) -> list[int]:
    """Per-turn ns of a bare ``Agent.prompt()`` on a fresh agent, ``turns`` times."""
    provider = FauxProvider([])
    agent = Agent(provider=provider, model=MODEL, emit=_ignore)
    times = []
    for _ in range(turns):
        provider.extend([REPLY])
        start = time.perf_counter_ns()
        await agent.prompt("hi")
        times.append(time.perf_counter_ns() - start)
    return times


def turn_overhead(batches: int, turns: int) -> dict[str, Any]:
    """Alternate batches of session and agent turns; compare the medians."""

    async def main() -> dict[str, list[int]]:
        out: dict[str, list[int]] = {"session": [], "agent": []}
        await session_turns(turns)  # warm up
        await agent_turns(turns)
        for i in range(batches):
            kinds = ("session", "agent") if i % 2 == 0 else ("agent", "session")
            for kind in kinds:
                run = session_turns if kind == "session" else agent_turns
                out[kind].extend(await run(turns))
        return out

    gc.collect()
    before = unit_f_ns()
    samples = trio.run(main)
    unit = (before + unit_f_ns()) / 2
    session = statistics.median(samples["session"])
    agent = statistics.median(samples["agent"])
    result: dict[str, Any] = {"turns_per_kind": len(samples["session"]), "F_ns": unit}
    for kind, values in samples.items():
        ordered = sorted(values)
        result[kind] = {
            "median_us": statistics.median(ordered) / 1e3,
            "p90_us": percentile(ordered, 0.90) / 1e3,
            "min_us": ordered[0] / 1e3,
            "median_F": statistics.median(ordered) / unit,
        }
    result["difference_us"] = (session - agent) / 1e3
    result["difference_F"] = (session - agent) / unit
    result["ratio"] = session / agent
    result["overhead_pct"] = (session / agent - 1) * 100
    result["min_ratio"] = min(samples["session"]) / min(samples["agent"])
    return result


@contextmanager
def _unwrap() -> Iterator[None]:
    """The shape of the session's ``_unwrapped()``: a generator-based context manager."""
    try:
        yield
    except BaseExceptionGroup:
        raise


async def _flush_nothing() -> None:
    """Like the session's ``_flush_history()`` without a history file: returns at once."""


async def _shape_turn(agent: Agent, shape: str) -> None:
    if shape == "scope":
        with trio.CancelScope():
            await agent.prompt("hi")
    elif shape == "scope+unwrap+shield":
        with trio.CancelScope(), _unwrap():
            await agent.prompt("hi")
        with trio.CancelScope(shield=True):
            await _flush_nothing()
    elif shape == "scope+nursery":
        with trio.CancelScope():
            async with trio.open_nursery():
                await agent.prompt("hi")
    else:  # the prompt's shape: run scope, unwrap CM, nursery, shielded scope after
        with trio.CancelScope(), _unwrap():
            async with trio.open_nursery():
                await agent.prompt("hi")
        with trio.CancelScope(shield=True):
            await _flush_nothing()


SHAPES = {
    "scope": "one trio.CancelScope",
    "scope+unwrap+shield": "run scope + unwrap CM + shielded scope, no nursery",
    "scope+nursery": "run scope + nursery",
    "prompt": "run scope + unwrap CM + nursery + shielded scope (the prompt's shape)",
}


def turn_shapes(batches: int, turns: int) -> dict[str, Any]:
    """The bare agent turn wrapped in the scopes ``prompt()`` adds, without its code."""

    async def shaped(shape: str) -> list[int]:
        provider = FauxProvider([])
        agent = Agent(provider=provider, model=MODEL, emit=_ignore)
        times = []
        for _ in range(turns):
            provider.extend([REPLY])
            start = time.perf_counter_ns()
            await _shape_turn(agent, shape)
            times.append(time.perf_counter_ns() - start)
        return times

    async def main() -> dict[str, list[int]]:
        kinds = ["agent", *SHAPES, "session"]
        out: dict[str, list[int]] = {k: [] for k in kinds}
        for i in range(batches):
            for kind in kinds if i % 2 == 0 else kinds[::-1]:
                if kind == "agent":
                    out[kind] += await agent_turns(turns)
                elif kind == "session":
                    out[kind] += await session_turns(turns)
                else:
                    out[kind] += await shaped(kind)
        return out

    gc.collect()
    samples = trio.run(main)
    base = statistics.median(samples["agent"])
    labels = {"agent": "nothing (bare agent)", **SHAPES, "session": "session.prompt()"}
    return {
        labels[k]: {"median_us": statistics.median(v) / 1e3, "x_agent": statistics.median(v) / base}
        for k, v in samples.items()
    }


def _chunks(k: int) -> FauxReply:
    return FauxReply(chunks=tuple("tok " for _ in range(k)))


async def _count_subscribe(k: int) -> tuple[int, int]:
    count = 0

    def on_event(event: SessionEvent) -> None:
        nonlocal count
        count += 1

    async with open_session(FauxProvider([_chunks(k)])) as session:
        session.subscribe(on_event)
        start = time.perf_counter_ns()
        await session.prompt("hi")
        elapsed = time.perf_counter_ns() - start
    return count, elapsed


async def _count_events(k: int) -> tuple[int, int]:
    count = 0

    async def consume(events: AsyncIterator[SessionEvent]) -> None:
        nonlocal count
        async for event in events:
            count += 1
            if isinstance(event, AgentEnd) and not event.will_retry:
                return  # the prompt's last event

    async with open_session(FauxProvider([_chunks(k)])) as session:
        with session.events(buffer=max(4096, 2 * k)) as events:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(consume, events)
                start = time.perf_counter_ns()
                await session.prompt("hi")
            elapsed = time.perf_counter_ns() - start
    return count, elapsed


async def _count_agent(k: int) -> tuple[int, int]:
    count = 0

    def on_event(event: SessionEvent) -> None:
        nonlocal count
        count += 1

    agent = Agent(provider=FauxProvider([_chunks(k)]), model=MODEL, emit=on_event)
    start = time.perf_counter_ns()
    await agent.prompt("hi")
    return count, time.perf_counter_ns() - start


WAYS: dict[str, Callable[[int], Any]] = {
    "subscribe": _count_subscribe,
    "events()": _count_events,
    "agent emit (baseline)": _count_agent,
}


def events_per_second(sizes: Sequence[int], repeats: int) -> dict[str, Any]:
    """Events per second for each way of listening, per streamed-reply length."""

    async def main() -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for k in sizes:
            row: dict[str, list[float]] = {way: [] for way in WAYS}
            for i in range(repeats):
                ways = list(WAYS) if i % 2 == 0 else list(reversed(WAYS))
                for way in ways:
                    count, elapsed = await WAYS[way](k)
                    row[way].append(count / (elapsed / 1e9))
            out[str(k)] = {way: statistics.median(v) for way, v in row.items()}
        return out

    gc.collect()
    return {"repeats": repeats, "events_per_s": trio.run(main)}


def render(data: dict[str, Any]) -> str:
    """The two results as text tables."""
    t = data["turn"]
    lines = [
        f"turn that succeeds first time ({t['turns_per_kind']} turns each,"
        f" F = {t['F_ns'] / 1e3:.2f} µs)",
        f"  session.prompt()      median {t['session']['median_us']:7.1f} µs"
        f" ({t['session']['median_F']:.1f} F)  p90 {t['session']['p90_us']:7.1f} µs",
        f"  bare Agent.prompt()   median {t['agent']['median_us']:7.1f} µs"
        f" ({t['agent']['median_F']:.1f} F)  p90 {t['agent']['p90_us']:7.1f} µs",
        f"  overhead              {t['difference_us']:+.1f} µs ({t['difference_F']:+.1f} F)"
        f" per turn = {t['overhead_pct']:+.1f} % (ratio {t['ratio']:.3f};"
        f" of the fastest turns {t['min_ratio']:.3f})",
        "",
        "events per second through one streamed reply of K chunks",
    ]
    eps = data["events"]["events_per_s"]
    ways = list(next(iter(eps.values())))
    lines.append("  " + "K".rjust(7) + "".join(w.rjust(24) for w in ways))
    for k, row in eps.items():
        lines.append("  " + f"{int(k):7,}" + "".join(f"{row[w]:24,.0f}" for w in ways))
    lines.append("")
    if "shapes" in data:
        lines.append("the bare agent turn inside the scopes prompt() adds (no session code)")
        for label, row in data["shapes"].items():
            lines.append(f"  {label:<72} {row['median_us']:7.1f} µs  ×{row['x_agent']:.2f}")
        lines.append("")
    lines.append(f"wall time {data['wall_s']:.1f} s")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run both measurements, print them, write JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer turns and repeats")
    parser.add_argument("--batches", type=int, help="batches of turns per kind (default 40)")
    parser.add_argument("--turns", type=int, default=50, help="turns per batch (default 50)")
    parser.add_argument(
        "--shapes", action="store_true", help="also time the turn inside prompt()'s scopes alone"
    )
    parser.add_argument("--output", type=Path, help="JSON path (default: benchmarks/results/)")
    args = parser.parse_args(argv)
    batches = args.batches or (10 if args.quick else 40)
    sizes = [500, 2000] if args.quick else [500, 2000, 8000]
    repeats = 1 if args.quick else 3
    start = time.perf_counter()
    data: dict[str, Any] = {
        "benchmark": "overhead",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine_info(),
        "config": {"batches": batches, "turns_per_batch": args.turns, "chunk_sizes": sizes},
        "turn": turn_overhead(batches, args.turns),
        "events": events_per_second(sizes, repeats),
    }
    if args.shapes:
        data["shapes"] = turn_shapes(max(4, batches // 2), args.turns)
    data["targets"] = [
        {
            "target": "overhead on a successful turn under 5 %",
            "value": data["turn"]["overhead_pct"],
            "limit": 5.0,
            "unit": "%",
            "met": data["turn"]["overhead_pct"] < 5.0,
        }
    ]
    data["wall_s"] = time.perf_counter() - start
    path = write_json("overhead", data, args.output)
    print(render(data))
    print(f"JSON: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
