"""What a session costs against plain Trio doing the same: abort, cancel-all, start, memory.

Run from the repository root::

    python benchmarks/session_costs.py            # the full run (sizes 1 and 10 000)
    python benchmarks/session_costs.py --quick    # sizes 1 and 200, few samples

The goals of issue 15 this module reports (``measure(quick)``):

* ``abort.p50.1`` / ``abort.p50.10000`` — ``await session.abort()`` on a session in
  backoff → its ``prompt()`` returned, median, ÷ the raw floor's median (both in F of
  their own block). "Raw" is PERF-NOTES' floor, ``cancel_latency.floor_nursery``: a
  ``with CancelScope() as cs: await trio.sleep(60)`` in a child of the waiter's own
  nursery, ``cs.cancel()`` from the controller, the waiter resumes after its
  ``async with``.
* ``abort.p99.1`` / ``abort.p99.10000`` — the same path's p99, in F.
* ``cancel_all.abort`` — the whole round at 10 000 (every session aborted one after
  another, each waited for), ÷ the same round of the raw floor.
* ``cancel_all.scope`` — 10 000 sessions in backoff in one nursery, its scope
  cancelled once → the nursery has exited, ÷ the same for 10 000 raw floors.
* ``backoff.start`` — from launching the 10 000 tasks (``open_session`` + ``prompt``
  for the session) until every one sleeps (``wait_all_tasks_blocked``), ÷ the raw
  floor's start.
* ``memory.backoff`` — live bytes per session in backoff (tracemalloc, after
  ``gc.collect()``), ÷ the raw floor's.
* ``first_try.overhead`` — a turn that succeeds at once: ``session.prompt()`` ÷ the
  bare ``Agent`` loop inside one ``trio.CancelScope`` (the bare loop alone is reported
  too).

The timed series run in blocks of their own ``trio.run`` (``cancel_latency.run_block``),
alternating forward and reversed, so a busy phase of the machine hits both alike.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

import trio
import trio.testing
from _bench import Probe, machine_info, unit_f_ns
from _goals import Figure
from cancel_latency import (
    BY_KEY,
    Accumulator,
    Runner,
    _setter,
    measure_memory,
    run_block,
)
from overhead import MODEL, REPLY, _ignore, agent_turns, session_turns

from trio_session import Agent, FauxProvider

RAW = BY_KEY["floor_nursery"]
SESSION = BY_KEY["session_abort"]

FULL_BIG = 10_000
QUICK_BIG = 200


def _alternating(n: int, rounds: int, blocks: int) -> dict[str, Accumulator]:
    """``blocks`` blocks of ``rounds`` rounds of the raw floor and of the session at ``n``."""
    acc = {RAW.key: Accumulator(), SESSION.key: Accumulator()}
    for block in range(blocks):
        order = (RAW, SESSION) if block % 2 == 0 else (SESSION, RAW)
        for series in order:
            _, done = run_block(series, n, rounds)
            acc[series.key].rounds.extend(done)
    return acc


def abort_figures(n: int, rounds: int, blocks: int, label: int) -> tuple[list[Figure], Any]:
    """``abort.p50.<label>`` and ``abort.p99.<label>``; also the accumulators."""
    acc = _alternating(n, rounds, blocks)
    raw = acc[RAW.key].summary()
    ses = acc[SESSION.key].summary()
    ratio = ses["median_F"] / raw["median_F"]
    text = (
        f"session {ses['median_F']:.1f} F ({ses['median_us']:.1f} µs) vs raw"
        f" {raw['median_F']:.1f} F ({raw['median_us']:.1f} µs), N = {n:,},"
        f" {ses['samples']} samples"
    )
    p99_text = (
        f"session p99 {ses['p99_F']:.1f} F ({ses['p99_us']:.1f} µs); raw p99"
        f" {raw['p99_F']:.1f} F; N = {n:,}"
    )
    detail = {"n": n, "session": ses, "raw": raw}
    figures = [
        Figure(f"abort.p50.{label}", ratio, text, detail),
        Figure(f"abort.p99.{label}", ses["p99_F"], p99_text, {"n": n}),
    ]
    return figures, acc


def big_round_figures(acc: dict[str, Accumulator], n: int) -> list[Figure]:
    """``cancel_all.abort`` and ``backoff.start`` from the rounds at the big size."""
    raw = acc[RAW.key].rounds
    ses = acc[SESSION.key].rounds
    total_raw = statistics.median(r.total_ns / r.unit_ns for r in raw)
    total_ses = statistics.median(r.total_ns / r.unit_ns for r in ses)
    setup_raw = statistics.median(r.setup_ns / r.unit_ns for r in raw)
    setup_ses = statistics.median(r.setup_ns / r.unit_ns for r in ses)
    ms_raw = statistics.median(r.total_ns for r in raw) / 1e6
    ms_ses = statistics.median(r.total_ns for r in ses) / 1e6
    st_raw = statistics.median(r.setup_ns for r in raw) / 1e6
    st_ses = statistics.median(r.setup_ns for r in ses) / 1e6
    return [
        Figure(
            "cancel_all.abort",
            total_ses / total_raw,
            f"{ms_ses:.0f} ms (session, abort() one by one) vs {ms_raw:.0f} ms (raw), N = {n:,}",
            {"n": n, "session_ms": ms_ses, "raw_ms": ms_raw},
        ),
        Figure(
            "backoff.start",
            setup_ses / setup_raw,
            f"{st_ses:.0f} ms (open_session + prompt → backoff) vs {st_raw:.0f} ms (raw),"
            f" N = {n:,}",
            {"n": n, "session_ms": st_ses, "raw_ms": st_raw},
        ),
    ]


async def _scope_round(runner: Runner, n: int) -> int:
    """``n`` tasks in their wait in one nursery; ns from cancelling its scope to its exit."""
    probes = [Probe() for _ in range(n)]
    slots: list[Any] = [None] * n
    async with trio.open_nursery() as nursery:
        for i, probe in enumerate(probes):
            nursery.start_soon(runner, probe, _setter(slots, i))
        await trio.testing.wait_all_tasks_blocked()
        if not all(t is not None and t.ready() for t in slots):
            msg = "not every task reached its wait"
            raise RuntimeError(msg)
        gc.collect()
        start = time.perf_counter_ns()
        nursery.cancel_scope.cancel()
    return time.perf_counter_ns() - start


def scope_figure(n: int, blocks: int) -> Figure:
    """``cancel_all.scope``: one outer scope cancelled over ``n`` sessions vs ``n`` raw."""
    found: dict[str, list[float]] = {RAW.key: [], SESSION.key: []}
    ms: dict[str, list[float]] = {RAW.key: [], SESSION.key: []}
    for block in range(blocks):
        for series in (RAW, SESSION) if block % 2 == 0 else (SESSION, RAW):
            gc.collect()
            before = unit_f_ns()
            took = trio.run(_scope_round, series.runner, n)
            unit = (before + unit_f_ns()) / 2
            found[series.key].append(took / unit)
            ms[series.key].append(took / 1e6)
    ratio = statistics.median(found[SESSION.key]) / statistics.median(found[RAW.key])
    ses_ms = statistics.median(ms[SESSION.key])
    raw_ms = statistics.median(ms[RAW.key])
    return Figure(
        "cancel_all.scope",
        ratio,
        f"{ses_ms:.0f} ms (sessions) vs {raw_ms:.0f} ms (raw), one outer scope, N = {n:,}",
        {"n": n, "session_ms": ses_ms, "raw_ms": raw_ms, "blocks": blocks},
    )


def memory_figure(n: int) -> Figure:
    """``memory.backoff``: live bytes per session in backoff vs per raw floor."""
    measure_memory(SESSION, min(n, 20), breakdown=False)  # warm up imports and caches
    raw = measure_memory(RAW, n, breakdown=False).bytes_per_task / 1024
    ses = measure_memory(SESSION, n, breakdown=False).bytes_per_task / 1024
    return Figure(
        "memory.backoff",
        ses / raw,
        f"{ses:.1f} KiB per session in backoff vs {raw:.1f} KiB raw (tracemalloc, N = {n:,})",
        {"n": n, "session_kib": ses, "raw_kib": raw},
    )


async def scoped_agent_turns(turns: int) -> list[int]:
    """Per-turn ns of a bare ``Agent.prompt()`` inside one ``trio.CancelScope``."""
    provider = FauxProvider([])
    agent = Agent(provider=provider, model=MODEL, emit=_ignore)
    times = []
    for _ in range(turns):
        provider.extend([REPLY])
        start = time.perf_counter_ns()
        with trio.CancelScope():
            await agent.prompt("hi")
        times.append(time.perf_counter_ns() - start)
    return times


def first_try_figure(batches: int, turns: int) -> Figure:
    """``first_try.overhead``: session ÷ (bare loop in one scope); the bare loop too."""
    kinds = {"bare": agent_turns, "bare+scope": scoped_agent_turns, "session": session_turns}

    async def main() -> dict[str, list[int]]:
        out: dict[str, list[int]] = {k: [] for k in kinds}
        for run in kinds.values():  # warm up
            await run(turns)
        for i in range(batches):
            for kind in list(kinds) if i % 2 == 0 else list(kinds)[::-1]:
                out[kind] += await kinds[kind](turns)
        return out

    gc.collect()
    samples = trio.run(main)
    med = {k: statistics.median(v) / 1e3 for k, v in samples.items()}
    ratio = med["session"] / med["bare+scope"]
    return Figure(
        "first_try.overhead",
        ratio,
        f"session {med['session']:.1f} µs, bare+scope {med['bare+scope']:.1f} µs,"
        f" bare {med['bare']:.1f} µs per turn (medians of {len(samples['session'])})",
        {
            "median_us": med,
            "session_vs_bare": med["session"] / med["bare"],
            "scope_vs_bare": med["bare+scope"] / med["bare"],
        },
    )


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def measure(quick: bool, big: int | None = None) -> list[Figure]:
    """Every figure of this module; ``quick`` only proves it runs (sizes 1 and 200).

    ``big`` overrides the large size (10 000; 200 when quick); progress goes to stderr.
    """
    if big is None:
        big = QUICK_BIG if quick else FULL_BIG
    figures: list[Figure] = []
    start = time.perf_counter()
    one, _ = abort_figures(1, 100 if quick else 250, 2 if quick else 8, 1)
    figures += one
    _log(f"abort at N = 1: {time.perf_counter() - start:.1f} s")
    many, acc = abort_figures(big, 1, 2 if quick else 4, FULL_BIG)
    figures += many
    figures += big_round_figures(acc, big)
    _log(f"abort at N = {big:,}: {time.perf_counter() - start:.1f} s")
    figures.append(scope_figure(big, 2 if quick else 4))
    _log(f"cancel-all by one scope: {time.perf_counter() - start:.1f} s")
    figures.append(memory_figure(100 if quick else 1000))
    _log(f"memory: {time.perf_counter() - start:.1f} s")
    figures.append(first_try_figure(2 if quick else 20, 20 if quick else 50))
    _log(f"first try: {time.perf_counter() - start:.1f} s")
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``measure`` and print every figure beside its goal."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="sizes 1 and 200, few samples")
    parser.add_argument("--big", type=int, help="the large size (default 10 000; 200 quick)")
    args = parser.parse_args(argv)
    info = machine_info()
    print(
        f"{info['cpu']}, {info['nproc']} CPUs, Python {info['python']}, trio {info['trio']},"
        f" trio_session source {info['trio_session_source']}"
        + (" (quick: figures are not verdicts)" if args.quick else "")
    )
    start = time.perf_counter()
    for figure in measure(args.quick, args.big):
        goal = figure.goal
        verdict = "met" if goal.met(figure.value) else "MISSED"
        print(
            f"{figure.key:<20} {figure.value:8.2f}  goal {goal.wanted:<8} {verdict:<6}"
            f"  {figure.text}"
        )
    print(f"wall time {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
