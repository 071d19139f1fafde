"""Cancellation latency of trio_session sessions in backoff, against floors and asyncio.

Run from the repository root::

    python benchmarks/cancel_latency.py                 # full run: N = 1 … 10 000
    python benchmarks/cancel_latency.py --quick         # N = 1 … 1 000, fewer samples
    python benchmarks/cancel_latency.py --sizes 1,10,100 --samples 500
    python benchmarks/cancel_latency.py --render benchmarks/results/cancel_latency.json --markdown

For each N, N tasks are put to sleep for 60 s (real clock) and then cancelled one
after another from one controller task. Each sample is ``t1 - t0``, both from
``time.perf_counter_ns()``: ``t0`` just before the cancelling call, ``t1`` where
the cancellation is observed. The controller waits until the cancelled task has
exited before it takes the next sample, so samples do not overlap. "total" is
the first ``t0`` of a round to the moment every task of that round has exited.

Series (their ``t0`` → ``t1``):

* floor_scope — ``with trio.CancelScope() as cs: await trio.sleep(60)`` in a task of a
  nursery; ``cs.cancel()`` → the task resumes after its ``with``. *The* floor.
* floor_nursery — PERF-NOTES' layout: the sleep above runs in a child of the
  waiter's own nursery; ``cs.cancel()`` → the waiter resumes after its ``async with``
  (the shape of a prompt: a nursery whose child is cancelled).
* trio_event — the waiter blocks in ``event.wait()``; ``event.set()`` → it resumes.
* session_abort_retry (a) — ``open_session(FauxProvider([503, …]))`` with
  ``baseDelayMs = 60 000``, in backoff; ``session.abort_retry()`` → ``auto_retry_end``
  at a synchronous ``subscribe()`` callback.
* session_abort_retry_events (a) — the same, observed by a task iterating
  ``session.events()``; up to N = 1 000 unless ``--all-n`` (10 000 sessions with
  a consumer task each take about 25 s to set up on 2 cores).
* session_abort (b) — ``await session.abort()`` → ``prompt()`` returned (in the
  prompt's task).
* asyncio_task_cancel — the asyncio floor: ``task.cancel()`` on a task in
  ``asyncio.sleep(60)`` → the task resumes in its ``except CancelledError``.
* asyncio_ref_abort_retry / asyncio_ref_abort — the reference algorithm in asyncio
  (``baselines/asyncio_reference.py``), (a) and (b) as above.

The asyncio series run in the same process, each block in its own event loop
(``asyncio.run``); trio blocks each run in their own ``trio.run``. Blocks of all
series alternate (forward, then reversed order), so a busy phase of the machine
hits every series alike. Rounds per size: enough for ``--samples`` samples
(default 1 000; one round for N ≥ 1 000), in blocks of about 250 samples.
``gc.collect()`` runs before every block, and before the cancel loop of every
round with N ≥ 1 000; the collector stays enabled while cancelling (its pauses
are part of the figures and reported per round).

Unit F is one ``await trio.lowlevel.checkpoint()`` in a loop (PERF-NOTES),
measured in its own ``trio.run`` just before and just after every block; each
sample is also given in F of its own block, and the ratios to the floor and to
asyncio are computed on those figures in F, so load drift between blocks does
not bias them. Memory per session (c) is measured after the timing phase, at
``--memory-n`` (default 500) tasks, with ``tracemalloc`` (live bytes once all
of them wait, after ``gc.collect()``, divided by N); the RSS growth during the
setup of each timing round is recorded too.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import gc
import json
import math
import statistics
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol, TypeAlias

import trio
import trio.testing
from _bench import (
    GcMonitor,
    Probe,
    machine_info,
    parse_sizes,
    rss_bytes,
    summarize,
    unit_f_ns,
    write_json,
)
from baselines.asyncio_reference import RefSession, Reply

from trio_session import FauxProvider, FauxReply, SessionEvent, open_session

SLEEP_S = 60.0
ERROR = "503 Service Unavailable"
SESSION_SETTINGS: dict[str, Any] = {"retry": {"baseDelayMs": int(SLEEP_S * 1000)}}

DEFAULT_SIZES = [1, 10, 100, 1000, 10000]
QUICK_SIZES = [1, 10, 100, 1000]
DEFAULT_SAMPLES = 1000
QUICK_SAMPLES = 300
BLOCK_SAMPLES = 250
MEMORY_N = 500
EVENTS_MAX_N = 1000
GC_PER_ROUND_MIN_N = 1000

Cancel: TypeAlias = Callable[[], Awaitable[None] | None]
Register: TypeAlias = Callable[["Target"], None]
Runtime: TypeAlias = Literal["trio", "asyncio"]


@dataclass(frozen=True, slots=True)
class Target:
    """What the controller cancels, and how to tell the task is in its wait."""

    cancel: Cancel
    ready: Callable[[], bool] = lambda: True


class Runner(Protocol):
    """The task under test: registers its target, waits, hits and ends its probe."""

    def __call__(self, probe: Probe, register: Register, /) -> Coroutine[Any, Any, None]: ...


@dataclass(frozen=True, slots=True)
class Series:
    """One measured series."""

    key: str
    label: str
    runtime: Runtime
    runner: Runner
    measures: Literal["floor", "a", "b"]
    counterpart: str | None = None  #: the asyncio series it is compared with
    memory: bool = False  #: measured in the memory phase
    max_n: int | None = None  #: skipped above this N (unless --all-n)


# -- the trio series ------------------------------------------------------------------


async def floor_scope(probe: Probe, register: Register) -> None:
    """A bare cancel scope around a long sleep."""
    with trio.CancelScope() as scope:
        register(Target(scope.cancel))
        await trio.sleep(SLEEP_S)
    probe.hit()
    probe.end()


async def _sleep_in(scope: trio.CancelScope) -> None:
    with scope:
        await trio.sleep(SLEEP_S)


async def floor_nursery(probe: Probe, register: Register) -> None:
    """The sleep in a child of the waiter's nursery; resume after the ``async with``."""
    async with trio.open_nursery() as nursery:
        scope = trio.CancelScope()
        register(Target(scope.cancel))
        nursery.start_soon(_sleep_in, scope)
    probe.hit()
    probe.end()


async def trio_event(probe: Probe, register: Register) -> None:
    """An ``Event.wait()`` woken by ``set()``."""
    event = trio.Event()
    register(Target(event.set))
    await event.wait()
    probe.hit()
    probe.end()


def _backoff_provider() -> FauxProvider:
    return FauxProvider([FauxReply(error=ERROR), FauxReply(text="never sent")])


async def session_abort_retry(probe: Probe, register: Register) -> None:
    """(a): ``abort_retry()`` → ``auto_retry_end`` at a sync ``subscribe()`` callback."""

    def on_event(event: SessionEvent) -> None:
        if event.type == "auto_retry_end":
            probe.hit()

    async with open_session(_backoff_provider(), settings=SESSION_SETTINGS) as session:
        session.subscribe(on_event)
        register(Target(session.abort_retry, lambda: session.is_retrying))
        await session.prompt("hi")
    probe.end()


async def _consume(events: AsyncIterator[SessionEvent], probe: Probe) -> None:
    async for event in events:
        if event.type == "auto_retry_end":
            probe.hit()
            return


async def session_abort_retry_events(probe: Probe, register: Register) -> None:
    """(a): ``abort_retry()`` → ``auto_retry_end`` at a task iterating ``events()``."""
    async with open_session(_backoff_provider(), settings=SESSION_SETTINGS) as session:
        register(Target(session.abort_retry, lambda: session.is_retrying))
        with session.events() as events:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_consume, events, probe)
                await session.prompt("hi")
    probe.end()


async def session_abort(probe: Probe, register: Register) -> None:
    """(b): ``await abort()`` → ``prompt()`` returned, seen in the prompt's task."""
    async with open_session(_backoff_provider(), settings=SESSION_SETTINGS) as session:
        register(Target(session.abort, lambda: session.is_retrying))
        await session.prompt("hi")
        probe.hit()
    probe.end()


# -- the asyncio series ---------------------------------------------------------------


async def asyncio_task_cancel(probe: Probe, register: Register) -> None:
    """The asyncio floor: ``task.cancel()`` on a task in ``asyncio.sleep``."""
    task = asyncio.current_task()
    assert task is not None

    def cancel() -> None:
        task.cancel()

    register(Target(cancel))
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.sleep(SLEEP_S)
    probe.hit()
    probe.end()


def _ref_session() -> RefSession:
    return RefSession(
        [Reply(error=ERROR), Reply(text="never sent")], base_delay_ms=int(SLEEP_S * 1000)
    )


async def asyncio_ref_abort_retry(probe: Probe, register: Register) -> None:
    """(a) in the asyncio reference: ``abort_retry()`` → ``auto_retry_end`` at a subscriber."""

    def on_event(event: dict[str, Any]) -> None:
        if event["type"] == "auto_retry_end":
            probe.hit()

    session = _ref_session()
    session.subscribe(on_event)
    register(Target(session.abort_retry, lambda: session.sleeping))
    await session.prompt("hi")
    probe.end()


async def asyncio_ref_abort(probe: Probe, register: Register) -> None:
    """(b) in the asyncio reference: ``await abort()`` → ``prompt()`` returned."""
    session = _ref_session()
    register(Target(session.abort, lambda: session.sleeping))
    await session.prompt("hi")
    probe.hit()
    probe.end()


SERIES: tuple[Series, ...] = (
    Series(
        "floor_scope",
        "floor: CancelScope+sleep",
        "trio",
        floor_scope,
        measures="floor",
        counterpart="asyncio_task_cancel",
        memory=True,
    ),
    Series(
        "floor_nursery",
        "floor: child in nursery",
        "trio",
        floor_nursery,
        measures="floor",
        counterpart="asyncio_task_cancel",
        memory=True,
    ),
    Series("trio_event", "trio.Event set→wait", "trio", trio_event, measures="floor"),
    Series(
        "session_abort_retry",
        "(a) abort_retry→subscribe",
        "trio",
        session_abort_retry,
        measures="a",
        counterpart="asyncio_ref_abort_retry",
        memory=True,
    ),
    Series(
        "session_abort_retry_events",
        "(a) abort_retry→events()",
        "trio",
        session_abort_retry_events,
        measures="a",
        counterpart="asyncio_ref_abort_retry",
        memory=True,
        max_n=EVENTS_MAX_N,
    ),
    Series(
        "session_abort",
        "(b) abort→prompt returned",
        "trio",
        session_abort,
        measures="b",
        counterpart="asyncio_ref_abort",
    ),
    Series(
        "asyncio_task_cancel",
        "asyncio: task.cancel()",
        "asyncio",
        asyncio_task_cancel,
        measures="floor",
        memory=True,
    ),
    Series(
        "asyncio_ref_abort_retry",
        "asyncio ref (a) abort_retry",
        "asyncio",
        asyncio_ref_abort_retry,
        measures="a",
        memory=True,
    ),
    Series(
        "asyncio_ref_abort",
        "asyncio ref (b) abort",
        "asyncio",
        asyncio_ref_abort,
        measures="b",
    ),
)
FLOOR = "floor_scope"
BY_KEY = {s.key: s for s in SERIES}


# -- rounds ---------------------------------------------------------------------------


@dataclass(slots=True)
class Round:
    """What one round of N cancellations produced."""

    latencies_ns: list[int]
    calls_ns: list[int]
    total_ns: int
    setup_ns: int
    rss_delta: int
    gc: dict[str, Any]
    unit_ns: float = math.nan  #: F measured around this round's block


@dataclass(slots=True)
class Accumulator:
    """Every round of one series at one N."""

    rounds: list[Round] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """Statistics over every sample of every round, in µs and in F."""
        latencies = [x for r in self.rounds for x in r.latencies_ns]
        in_f = [x / r.unit_ns for r in self.rounds for x in r.latencies_ns]
        calls = [x for r in self.rounds for x in r.calls_ns]
        totals = [r.total_ns for r in self.rounds]
        n = len(self.rounds[0].latencies_ns)
        out: dict[str, Any] = dict(summarize(latencies, in_f))
        out["rounds"] = len(self.rounds)
        out["total_ms"] = statistics.median(totals) / 1e6
        out["total_F"] = statistics.median(r.total_ns / r.unit_ns for r in self.rounds)
        out["F_us_blocks"] = sorted({round(r.unit_ns / 1e3, 3) for r in self.rounds})
        out["total_ms_rounds"] = [t / 1e6 for t in totals]
        out["call_median_us"] = statistics.median(calls) / 1e3 if calls else None
        out["setup_us_per_task"] = statistics.median(r.setup_ns for r in self.rounds) / n / 1e3
        out["rss_kib_per_task"] = max(r.rss_delta for r in self.rounds) / n / 1024
        gcs = [r.gc for r in self.rounds]
        out["gc"] = {
            "collections_per_round": [
                statistics.median(g["collections"][i] for g in gcs) for i in range(3)
            ],
            "total_ms_per_round": statistics.median(g["total_ms"] for g in gcs),
            "max_pause_ms": max(g["max_ms"] for g in gcs),
        }
        return out


async def _cancel_all(
    probes: Sequence[Probe], targets: Sequence[Target], make_event: Callable[[], Any]
) -> None:
    """Cancel every target in turn; wait for each to be observed and to exit."""
    for probe, target in zip(probes, targets, strict=True):
        done = probe.done = make_event()
        cancel = target.cancel
        probe.t0 = time.perf_counter_ns()
        pending = cancel()
        probe.t_called = time.perf_counter_ns()
        if pending is not None:
            await pending
            probe.t_called = 0  # an async cancel: its call time is not a call cost
        await done.wait()


def _round(
    probes: Sequence[Probe], total_ns: int, setup_ns: int, rss_delta: int, gcm: GcMonitor
) -> Round:
    missing = sum(1 for p in probes if not p.t1)
    if missing:
        msg = f"{missing} of {len(probes)} cancellations were never observed"
        raise RuntimeError(msg)
    return Round(
        latencies_ns=[p.t1 - p.t0 for p in probes],
        calls_ns=[p.t_called - p.t0 for p in probes if p.t_called],
        total_ns=total_ns,
        setup_ns=setup_ns,
        rss_delta=rss_delta,
        gc=gcm.summary(),
    )


def _check_ready(targets: Sequence[Target | None]) -> list[Target]:
    ready = [t for t in targets if t is not None and t.ready()]
    if len(ready) != len(targets):
        msg = f"only {len(ready)} of {len(targets)} tasks reached their wait"
        raise RuntimeError(msg)
    return ready


async def trio_round(runner: Runner, n: int) -> Round:
    """Put ``n`` trio tasks in their wait, then cancel them one by one."""
    probes = [Probe() for _ in range(n)]
    slots: list[Target | None] = [None] * n
    rss0 = rss_bytes()
    start = time.perf_counter_ns()
    async with trio.open_nursery() as nursery:
        for i, probe in enumerate(probes):
            nursery.start_soon(runner, probe, _setter(slots, i))
        await trio.testing.wait_all_tasks_blocked()
        setup_ns = time.perf_counter_ns() - start
        rss_delta = rss_bytes() - rss0
        targets = _check_ready(slots)
        if n >= GC_PER_ROUND_MIN_N:
            gc.collect()
        with GcMonitor() as gcm:
            first = time.perf_counter_ns()
            await _cancel_all(probes, targets, trio.Event)
    total_ns = time.perf_counter_ns() - first
    return _round(probes, total_ns, setup_ns, rss_delta, gcm)


async def asyncio_round(runner: Runner, n: int) -> Round:
    """Put ``n`` asyncio tasks in their wait, then cancel them one by one."""
    probes = [Probe() for _ in range(n)]
    slots: list[Target | None] = [None] * n
    rss0 = rss_bytes()
    start = time.perf_counter_ns()
    tasks = [asyncio.create_task(runner(p, _setter(slots, i))) for i, p in enumerate(probes)]
    await _asyncio_settle(slots)
    setup_ns = time.perf_counter_ns() - start
    rss_delta = rss_bytes() - rss0
    targets = _check_ready(slots)
    if n >= GC_PER_ROUND_MIN_N:
        gc.collect()
    with GcMonitor() as gcm:
        first = time.perf_counter_ns()
        await _cancel_all(probes, targets, asyncio.Event)
        await asyncio.gather(*tasks)
    total_ns = time.perf_counter_ns() - first
    return _round(probes, total_ns, setup_ns, rss_delta, gcm)


async def _asyncio_settle(slots: Sequence[Target | None], max_steps: int = 10_000) -> None:
    """Let the loop run until every task has registered and reached its wait.

    asyncio has no ``wait_all_tasks_blocked``: poll the targets' ``ready()``
    between loop iterations, then give tasks started by the ready ones (the
    reference's race tasks) a few more iterations to reach their own waits.
    """
    for _ in range(max_steps):
        if all(t is not None and t.ready() for t in slots):
            break
        await asyncio.sleep(0)
    for _ in range(3):
        await asyncio.sleep(0)


def _setter(slots: list[Target | None], i: int) -> Register:
    def register(target: Target) -> None:
        slots[i] = target

    return register


def run_block(series: Series, n: int, rounds: int) -> tuple[float, list[Round]]:
    """``rounds`` rounds of one series at one N, in a fresh event loop.

    F is measured (in its own ``trio.run``) just before and just after the block;
    every round of the block is converted to F with the mean of the two.

    Returns:
        The block's F in ns, and its rounds.
    """
    gc.collect()
    before = unit_f_ns()
    if series.runtime == "trio":

        async def trio_main() -> list[Round]:
            return [await trio_round(series.runner, n) for _ in range(rounds)]

        done = trio.run(trio_main)
    else:

        async def asyncio_main() -> list[Round]:
            return [await asyncio_round(series.runner, n) for _ in range(rounds)]

        done = asyncio.run(asyncio_main())
    unit = (before + unit_f_ns()) / 2
    for r in done:
        r.unit_ns = unit
    return unit, done


# -- memory ---------------------------------------------------------------------------


@dataclass(slots=True)
class MemoryResult:
    """Live bytes per task while all N wait, and where the largest shares come from."""

    bytes_per_task: float
    top_files: list[tuple[str, float]]


def _snapshot_breakdown(
    before: tracemalloc.Snapshot | None, n: int, limit: int = 12
) -> list[tuple[str, float]]:
    if before is None:
        return []
    after = tracemalloc.take_snapshot()
    stats = after.compare_to(before, "filename")
    site = str(Path(trio.__file__).parent.parent)
    top = []
    for stat in stats[:limit]:
        name = stat.traceback[0].filename.replace(site + "/", "")
        top.append((name, stat.size_diff / n))
    return top


async def trio_memory(runner: Runner, n: int, breakdown: bool) -> MemoryResult:
    """Live bytes per task with ``n`` tasks in their wait (tracemalloc)."""
    slots: list[Target | None] = [None] * n
    probes = [Probe() for _ in range(n)]
    gc.collect()
    before = tracemalloc.take_snapshot() if breakdown else None
    base = tracemalloc.get_traced_memory()[0]
    async with trio.open_nursery() as nursery:
        for i, probe in enumerate(probes):
            nursery.start_soon(runner, probe, _setter(slots, i))
        await trio.testing.wait_all_tasks_blocked()
        _check_ready(slots)
        gc.collect()
        used = tracemalloc.get_traced_memory()[0] - base
        top = _snapshot_breakdown(before, n)
        nursery.cancel_scope.cancel()
    return MemoryResult(used / n, top)


async def asyncio_memory(runner: Runner, n: int, breakdown: bool) -> MemoryResult:
    """Live bytes per task with ``n`` asyncio tasks in their wait (tracemalloc)."""
    slots: list[Target | None] = [None] * n
    probes = [Probe() for _ in range(n)]
    gc.collect()
    before = tracemalloc.take_snapshot() if breakdown else None
    base = tracemalloc.get_traced_memory()[0]
    tasks = [asyncio.create_task(runner(p, _setter(slots, i))) for i, p in enumerate(probes)]
    await _asyncio_settle(slots)
    _check_ready(slots)
    gc.collect()
    used = tracemalloc.get_traced_memory()[0] - base
    top = _snapshot_breakdown(before, n)
    for task in asyncio.all_tasks():
        if task is not asyncio.current_task():
            task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return MemoryResult(used / n, top)


def measure_memory(series: Series, n: int, breakdown: bool) -> MemoryResult:
    """Run one memory round of ``series`` at ``n`` under tracemalloc."""
    gc.collect()
    tracemalloc.start()
    try:
        if series.runtime == "trio":
            return trio.run(trio_memory, series.runner, n, breakdown)
        return asyncio.run(asyncio_memory(series.runner, n, breakdown))
    finally:
        tracemalloc.stop()


# -- the run --------------------------------------------------------------------------


def plan_rounds(n: int, samples: int) -> tuple[int, int]:
    """(blocks, rounds per block) giving at least ``samples`` samples at size ``n``."""
    rounds = max(1, math.ceil(samples / n))
    per_block = max(1, min(rounds, math.ceil(BLOCK_SAMPLES / n)))
    return math.ceil(rounds / per_block), per_block


def run(
    sizes: Sequence[int],
    samples: int,
    series: Sequence[Series],
    *,
    memory_n: int | None,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """The whole benchmark; returns the JSON-ready result."""
    wall_start = time.perf_counter()
    machine = machine_info()
    for s in series:  # warm up imports and caches
        run_block(s, 2, 1)
    raw: dict[int, dict[str, Accumulator]] = {}
    units: dict[int, list[float]] = {}
    sample_plan: dict[int, dict[str, int]] = {}
    block_count = 0
    for n in sizes:
        blocks, per_block = plan_rounds(n, samples)
        sample_plan[n] = {"rounds": blocks * per_block, "samples": blocks * per_block * n}
        size_start = time.perf_counter()
        here = [s for s in series if s.max_n is None or n <= s.max_n]
        acc = raw[n] = {s.key: Accumulator() for s in here}
        unit = units[n] = []
        for _ in range(blocks):
            order = here if block_count % 2 == 0 else here[::-1]
            block_count += 1
            for s in order:
                block_start = time.perf_counter()
                block_unit, rounds = run_block(s, n, per_block)
                unit.append(block_unit)
                acc[s.key].rounds.extend(rounds)
                if n >= GC_PER_ROUND_MIN_N:
                    log(f"  N={n} {s.key}: {time.perf_counter() - block_start:.1f} s")
        log(
            f"N={n}: {blocks * per_block} round(s), {blocks * per_block * n} samples per series,"
            f" F = {statistics.median(unit) / 1e3:.2f} µs (median of {len(unit)} blocks),"
            f" {time.perf_counter() - size_start:.1f} s"
        )
    all_f = [f for u in units.values() for f in u]
    results = {str(n): {key: a.summary() for key, a in acc.items()} for n, acc in raw.items()}
    memory_results: dict[str, dict[str, float]] = {}
    breakdown: dict[str, list[tuple[str, float]]] = {}
    if memory_n is not None:
        mem_start = time.perf_counter()
        memory_sizes = [memory_n]
        for n in memory_sizes:
            row = memory_results[str(n)] = {}
            for s in series:
                if not s.memory:
                    continue
                top = n == max(memory_sizes) and s.key == "session_abort_retry"
                m = measure_memory(s, n, top)
                row[s.key] = m.bytes_per_task / 1024
                if top:
                    breakdown[s.key] = [(name, b / 1024) for name, b in m.top_files]
        log(f"memory (tracemalloc): {time.perf_counter() - mem_start:.1f} s")
    data: dict[str, Any] = {
        "benchmark": "cancel_latency",
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine,
        "config": {
            "sizes": list(sizes),
            "samples_target": samples,
            "block_samples": BLOCK_SAMPLES,
            "sleep_s": SLEEP_S,
            "gc_collect_before_round_from_n": GC_PER_ROUND_MIN_N,
            "memory_sizes": [int(n) for n in memory_results],
            "plan": {str(n): p for n, p in sample_plan.items()},
        },
        "unit": {
            "F_ns": statistics.median(all_f),
            "F_ns_by_n": {str(n): statistics.median(u) for n, u in units.items()},
            "F_ns_blocks": {str(n): u for n, u in units.items()},
        },
        "series": {
            s.key: {
                "label": s.label,
                "runtime": s.runtime,
                "measures": s.measures,
                "counterpart": s.counterpart,
                "doc": (s.runner.__doc__ or "").strip(),
            }
            for s in series
        },
        "results": results,
        "memory_kib_per_task": memory_results,
        "memory_breakdown_kib_per_task": breakdown,
    }
    data["ratios"] = ratios(data)
    data["targets"] = targets(data)
    data["wall_s"] = time.perf_counter() - wall_start
    return data


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def ratios(data: dict[str, Any]) -> dict[str, dict[str, dict[str, float | None]]]:
    """Each series against the floor and against its asyncio counterpart, per N.

    Computed on the figures in F (each block normalised by its own F), so a busy
    phase of the machine during one block does not bias a ratio.
    """
    out: dict[str, dict[str, dict[str, float | None]]] = {}
    for n, row in data["results"].items():
        out[n] = {}
        floor = row.get(FLOOR)
        for key, r in row.items():
            entry: dict[str, float | None] = {}
            if floor is not None:
                for stat in ("median_F", "p99_F", "total_F"):
                    entry[f"{stat.split('_')[0]}_x_floor"] = _ratio(r[stat], floor[stat])
            other = data["series"][key]["counterpart"]
            if other is not None and other in row:
                for stat in ("median_F", "p99_F", "total_F"):
                    entry[f"{stat.split('_')[0]}_x_asyncio"] = _ratio(r[stat], row[other][stat])
            out[n][key] = entry
    return out


def targets(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets that this benchmark measures, met or not."""
    results = data["results"]
    out: list[dict[str, Any]] = []

    def add(name: str, value: float | None, limit: float, unit: str) -> None:
        out.append(
            {
                "target": name,
                "value": value,
                "limit": limit,
                "unit": unit,
                "met": None if value is None else value < limit,
            }
        )

    one = results.get("1", {})
    if "session_abort_retry" in one and FLOOR in one:
        ratio = one["session_abort_retry"]["median_F"] / one[FLOOR]["median_F"]
        add("N=1 median (a) within 5× the bare-scope floor", ratio, 5.0, "× floor")
    big = results.get("10000", {})
    if "session_abort_retry" in big:
        a = big["session_abort_retry"]
        add("N=10 000 p99 (a) under 5 ms", a["p99_us"] / 1e3, 5.0, "ms")
        add("N=10 000 total cancel-all (a) under 1 s", a["total_ms"] / 1e3, 1.0, "s")
    if "session_abort" in big:
        add("N=10 000 total cancel-all (b) under 1 s", big["session_abort"]["total_ms"] / 1e3,
            1.0, "s")  # fmt: skip
    memory = data["memory_kib_per_task"]
    if memory:
        n = max(memory, key=int)
        value = memory[n].get("session_abort_retry")
        add(f"memory per session in backoff under 20 KiB (N={n})", value, 20.0, "KiB")
    return out


# -- the table ------------------------------------------------------------------------


def _fmt(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "—"
    return f"{value:,.{digits}f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], markdown: bool) -> list[str]:
    if markdown:
        lines = ["| " + " | ".join(header) + " |"]
        lines.append("|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|")
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return lines
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    fmt = [
        (cell.ljust(w) if i == 0 else cell.rjust(w))
        for i, (cell, w) in enumerate(zip(header, widths, strict=True))
    ]
    lines = ["  ".join(fmt)]
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        cells = [
            (c.ljust(w) if i == 0 else c.rjust(w))
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("  ".join(cells))
    return lines


def render(data: dict[str, Any], *, markdown: bool = False) -> str:
    """The latency table per N, the memory table and the targets, as text or Markdown."""
    by_n = data["unit"]["F_ns_by_n"]
    lines = [
        "unit F = one `await trio.lowlevel.checkpoint()`, measured around every block;"
        " median per N: " + ", ".join(f"N={int(n):,}: {f / 1e3:.2f} µs" for n, f in by_n.items()),
        "",
    ]
    header = [
        "series", "samples", "median µs", "median F", "p99 µs", "p99 F", "max µs",
        "total ms", "call µs", "med ×floor", "p99 ×floor", "total ×floor",
        "med ×asyncio", "total ×asyncio", "gc ms/round",
    ]  # fmt: skip
    for n, row in data["results"].items():
        plan = data["config"]["plan"][n]
        lines.append(
            f"N = {int(n):,}: {plan['rounds']} round(s) per series, F = {by_n[n] / 1e3:.2f} µs"
        )
        if markdown:
            lines.append("")
        rows = []
        for key, r in row.items():
            q = data["ratios"][n][key]
            rows.append(
                [
                    data["series"][key]["label"],
                    f"{r['samples']}",
                    _fmt(r["median_us"]),
                    _fmt(r["median_F"]),
                    _fmt(r["p99_us"]),
                    _fmt(r["p99_F"]),
                    _fmt(r["max_us"]),
                    _fmt(r["total_ms"], 2),
                    _fmt(r["call_median_us"]),
                    _fmt(q.get("median_x_floor"), 2),
                    _fmt(q.get("p99_x_floor"), 2),
                    _fmt(q.get("total_x_floor"), 2),
                    _fmt(q.get("median_x_asyncio"), 2),
                    _fmt(q.get("total_x_asyncio"), 2),
                    _fmt(r["gc"]["total_ms_per_round"], 1),
                ]
            )
        lines += _table(header, rows, markdown)
        lines.append("")
    memory = data["memory_kib_per_task"]
    if memory:
        keys = [k for k in data["series"] if any(k in row for row in memory.values())]
        lines.append(
            "memory per task in its wait, KiB: live bytes (tracemalloc, after gc.collect()) / N"
            " (RSS growth per task is in the JSON; in one process it mostly shows heap reuse)"
        )
        if markdown:
            lines.append("")
        header = ["series", *[f"N = {int(n):,}" for n in memory]]
        rows = [
            [data["series"][key]["label"], *[_fmt(row.get(key)) for row in memory.values()]]
            for key in keys
        ]
        lines += _table(header, rows, markdown)
        lines.append("")
    if data["targets"]:
        lines.append("targets (issue 8)")
        if markdown:
            lines.append("")
        rows = [
            [
                t["target"],
                f"{_fmt(t['value'], 2)} {t['unit']}",
                "met" if t["met"] else ("not measured" if t["met"] is None else "MISSED"),
            ]
            for t in data["targets"]
        ]
        lines += _table(["target", "measured", ""], rows, markdown)
        lines.append("")
    lines.append(f"wall time {data['wall_s']:.1f} s")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the flags, run (or re-render) and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="N up to 1 000, fewer samples")
    parser.add_argument("--sizes", type=parse_sizes, help="comma-separated N, e.g. 1,10,100")
    parser.add_argument("--samples", type=int, help="at least this many samples per N")
    parser.add_argument("--series", help="comma-separated series keys (default: all)")
    parser.add_argument(
        "--all-n",
        action="store_true",
        help=f"also run the events() series above N = {EVENTS_MAX_N:,} (about 25 s more)",
    )
    parser.add_argument(
        "--memory-n", type=int, default=MEMORY_N, help="N of the tracemalloc phase (0: skip it)"
    )
    parser.add_argument("--output", type=Path, help="JSON path (default: benchmarks/results/)")
    parser.add_argument("--render", type=Path, help="print the table of a saved JSON and exit")
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    args = parser.parse_args(argv)
    if args.render is not None:
        print(render(json.loads(args.render.read_text(encoding="utf-8")), markdown=args.markdown))
        return 0
    sizes = args.sizes or (QUICK_SIZES if args.quick else DEFAULT_SIZES)
    samples = args.samples or (QUICK_SAMPLES if args.quick else DEFAULT_SAMPLES)
    chosen = list(SERIES)
    if args.series:
        wanted = set(args.series.split(","))
        unknown = wanted - set(BY_KEY)
        if unknown:
            parser.error(f"unknown series {sorted(unknown)}; known: {sorted(BY_KEY)}")
        chosen = [s for s in SERIES if s.key in wanted]
    if args.all_n:
        chosen = [dataclasses.replace(s, max_n=None) for s in chosen]

    def log(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    data = run(sizes, samples, chosen, memory_n=args.memory_n or None, log=log)
    data["config"]["argv"] = list(sys.argv[1:] if argv is None else argv)
    path = write_json("cancel_latency", data, args.output)
    print(render(data, markdown=args.markdown))
    print(f"JSON: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
