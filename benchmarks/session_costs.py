"""What a session costs against plain Trio doing the same: abort, cancel-all, start, memory.

Run from the repository root::

    python benchmarks/session_costs.py            # the full run (sizes 1 and 10 000)
    python benchmarks/session_costs.py --quick    # sizes 1 and 200, few samples

The goals this module reports (``measure(quick)``); every timed figure is a ratio of
the same unit (µs or ms) from adjacent blocks of one run, one ratio per round, and the
figure is the median of the rounds (``_goals.py`` holds the wording beside each):

* ``abort.p50.1`` / ``abort.p50.10000`` — ``await session.abort()`` on a session in
  backoff → its ``prompt()`` returned, median µs of a session block ÷ median µs of the
  adjacent raw block. "Raw" is PERF-NOTES' floor, ``cancel_latency.floor_nursery``: a
  ``with CancelScope() as cs: await trio.sleep(60)`` in a child of the waiter's own
  nursery, ``cs.cancel()`` from the controller, the waiter resumes after its
  ``async with``. Nothing is divided by F before the ratio.
* ``abort.p99.1`` / ``abort.p99.10000`` — the same path's p99, in F of its block (F is a
  unit for tails only).
* ``cancel_all.abort`` / ``cancel_all.abort_retry`` — 10 000 sessions in backoff in one
  nursery, one ``start_soon`` of ``abort()`` (``abort_retry()``) per session at once, as
  an application shutting down does → the nursery has exited, ÷ the raw floors each
  cancelled by a ``start_soon`` of ``cs.cancel``. Gen-0/gen-2 collections shown.
* ``cancel_all.abort_seq`` — the same, aborted one after another, each awaited.
* ``cancel_all.scope`` — the nursery's scope cancelled once → the nursery has exited.
* ``backoff.start`` — from launching the 10 000 tasks (``open_session`` + ``prompt``
  for the session) until every one sleeps (``wait_all_tasks_blocked``), ÷ the raw
  floor's start.
* ``memory.backoff`` — live bytes per session in backoff (tracemalloc, after
  ``gc.collect()``), ÷ the raw floor's.
* ``first_try.overhead`` — as worded: a turn that succeeds at once, the session's
  overhead over the bare ``Agent`` loop ÷ the overhead of one ``trio.CancelScope``
  around the bare loop.

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
from _bench import GcMonitor, Probe, machine_info, percentile
from _goals import Figure, pairs_ratio
from cancel_latency import (
    BY_KEY,
    Round,
    Runner,
    _setter,
    measure_memory,
    run_block,
)
from overhead import MODEL, REPLY, _ignore, agent_turns, session_turns

from trio_session import Agent, FauxProvider

RAW = BY_KEY["floor_nursery"]
SESSION = BY_KEY["session_abort"]
SESSION_RETRY = BY_KEY["session_abort_retry"]

FULL_BIG = 10_000
QUICK_BIG = 200


def _block_median_us(rounds: Sequence[Round]) -> float:
    return statistics.median(x for r in rounds for x in r.latencies_ns) / 1e3


def _block_p99_f(rounds: Sequence[Round]) -> float:
    ordered = sorted(x / r.unit_ns for r in rounds for x in r.latencies_ns)
    return percentile(ordered, 0.99)


def _pairs(n: int, rounds: int, pairs: int) -> list[dict[str, list[Round]]]:
    """``pairs`` rounds, each one block of the raw floor and one of the session at ``n``
    (``rounds`` rounds of ``n`` cancellations per block), the order alternating."""
    out = []
    for pair in range(pairs):
        order = (RAW, SESSION) if pair % 2 == 0 else (SESSION, RAW)
        found: dict[str, list[Round]] = {}
        for series in order:
            _, done = run_block(series, n, rounds)
            found[series.key] = done
        out.append(found)
    return out


def _spread(values: Sequence[float], fmt: str = ".2f") -> str:
    return f"{statistics.median(values):{fmt}} [{min(values):{fmt}}–{max(values):{fmt}}]"


def abort_figures(
    n: int, rounds: int, pairs: int, label: int
) -> tuple[list[Figure], list[dict[str, list[Round]]]]:
    """``abort.p50.<label>`` and ``abort.p99.<label>``; also the blocks."""
    done = _pairs(n, rounds, pairs)
    raw_us = [_block_median_us(p[RAW.key]) for p in done]
    ses_us = [_block_median_us(p[SESSION.key]) for p in done]
    p99 = [_block_p99_f(p[SESSION.key]) for p in done]
    raw_p99 = [_block_p99_f(p[RAW.key]) for p in done]
    samples = sum(len(r.latencies_ns) for p in done for r in p[SESSION.key])
    text = (
        f"session p50 {_spread(ses_us, '.1f')} µs vs raw {_spread(raw_us, '.1f')} µs"
        f" (median [min–max] of {pairs} block pairs), N = {n:,}, {samples} samples"
    )
    p99_text = (
        f"session p99 {_spread(p99, '.1f')} F; raw p99 {_spread(raw_p99, '.1f')} F;"
        f" F {_spread([p[SESSION.key][0].unit_ns / 1e3 for p in done], '.1f')} µs; N = {n:,}"
    )
    floor = f"raw Trio p50 {statistics.median(raw_us):.1f} µs"
    detail = {"n": n, "session_p50_us": ses_us, "raw_p50_us": raw_us}
    figures = [
        Figure(f"abort.p50.{label}", pairs_ratio(ses_us, raw_us), text, floor, detail),
        Figure(
            f"abort.p99.{label}",
            tuple(p99),
            p99_text,
            f"raw Trio p99 {statistics.median(raw_p99):.1f} F",
            {"n": n, "raw_p99_F": raw_p99},
        ),
    ]
    return figures, done


def _gc_text(gcs: Sequence[dict[str, Any]]) -> str:
    """Gen-0 and gen-2 collections and the longest pause, as a median over rounds."""
    g0 = statistics.median(g["collections"][0] for g in gcs)
    g2 = statistics.median(g["collections"][2] for g in gcs)
    pause = max(g["max_ms"] for g in gcs)
    return f"gc gen-0 {g0:g}, gen-2 {g2:g} per round, longest pause {pause:.0f} ms"


def big_round_figures(done: list[dict[str, list[Round]]], n: int) -> list[Figure]:
    """``cancel_all.abort_seq`` and ``backoff.start`` from the block pairs at the big size."""
    raw_ms = [statistics.median(r.total_ns for r in p[RAW.key]) / 1e6 for p in done]
    ses_ms = [statistics.median(r.total_ns for r in p[SESSION.key]) / 1e6 for p in done]
    raw_st = [statistics.median(r.setup_ns for r in p[RAW.key]) / 1e6 for p in done]
    ses_st = [statistics.median(r.setup_ns for r in p[SESSION.key]) / 1e6 for p in done]
    ses_gc = [r.gc for p in done for r in p[SESSION.key]]
    raw_gc = [r.gc for p in done for r in p[RAW.key]]
    return [
        Figure(
            "cancel_all.abort_seq",
            pairs_ratio(ses_ms, raw_ms),
            f"{_spread(ses_ms, '.0f')} ms (session, abort() one by one) vs"
            f" {_spread(raw_ms, '.0f')} ms (raw), N = {n:,}; session {_gc_text(ses_gc)};"
            f" raw {_gc_text(raw_gc)}",
            f"raw Trio {statistics.median(raw_ms):.0f} ms",
            {"n": n, "session_ms": ses_ms, "raw_ms": raw_ms, "gc": ses_gc, "raw_gc": raw_gc},
        ),
        Figure(
            "backoff.start",
            pairs_ratio(ses_st, raw_st),
            f"{_spread(ses_st, '.0f')} ms (open_session + prompt → backoff) vs"
            f" {_spread(raw_st, '.0f')} ms (raw), N = {n:,}",
            f"raw Trio {statistics.median(raw_st):.0f} ms",
            {"n": n, "session_ms": ses_st, "raw_ms": raw_st},
        ),
    ]


async def _call(cancel: Any) -> None:
    pending = cancel()
    if pending is not None:
        await pending


async def _all_round(runner: Runner, n: int, how: str) -> tuple[int, dict[str, Any]]:
    """``n`` tasks in their wait in one nursery, all cancelled at once; ns from the first
    cancel to the nursery's exit, and the collector's work meanwhile.

    ``how`` is ``"scope"`` (the nursery's scope cancelled once) or ``"each"`` (one
    ``start_soon`` per task of its own cancel: ``cs.cancel`` for the raw floor,
    ``abort()`` / ``abort_retry()`` for a session).
    """
    probes = [Probe() for _ in range(n)]
    slots: list[Any] = [None] * n
    with GcMonitor() as gcm:
        async with trio.open_nursery() as nursery:
            for i, probe in enumerate(probes):
                nursery.start_soon(runner, probe, _setter(slots, i))
            await trio.testing.wait_all_tasks_blocked()
            if not all(t is not None and t.ready() for t in slots):
                msg = "not every task reached its wait"
                raise RuntimeError(msg)
            gc.collect()
            gcm.pauses_ns.clear()
            gcm.by_generation[:] = [0, 0, 0]
            start = time.perf_counter_ns()
            if how == "scope":
                nursery.cancel_scope.cancel()
            else:
                for target in slots:
                    nursery.start_soon(_call, target.cancel)
        took = time.perf_counter_ns() - start
    return took, gcm.summary()


def all_at_once_figures(n: int, rounds: int) -> list[Figure]:
    """``cancel_all.abort``, ``cancel_all.abort_retry`` and ``cancel_all.scope``.

    Each round runs the raw floor and the sessions once per way (rotating the order), in
    fresh ``trio.run``s; each way's figure is its session ms ÷ the raw ms of the same round.
    """
    ways = {
        "cancel_all.abort": ("each", SESSION, "start_soon(abort()) each"),
        "cancel_all.abort_retry": ("each", SESSION_RETRY, "start_soon(abort_retry()) each"),
        "cancel_all.scope": ("scope", SESSION, "one outer scope"),
    }
    runs: list[tuple[str, str, Runner]] = [("raw.each", "each", RAW.runner)]
    runs += [("raw.scope", "scope", RAW.runner)]
    runs += [(key, how, series.runner) for key, (how, series, _) in ways.items()]
    ms: dict[str, list[float]] = {name: [] for name, _, _ in runs}
    gcs: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in runs}
    for r in range(rounds):
        shift = r % len(runs)
        for name, how, runner in runs[shift:] + runs[:shift]:
            gc.collect()
            took, collected = trio.run(_all_round, runner, n, how)
            ms[name].append(took / 1e6)
            gcs[name].append(collected)
    figures = []

    def outside_gc(name: str) -> float:
        """Median ms of ``name``'s rounds with the collector's pauses taken out."""
        paired = zip(ms[name], gcs[name], strict=True)
        return float(statistics.median(t - g["total_ms"] for t, g in paired))

    for key, (how, _, label) in ways.items():
        raw = ms[f"raw.{how}"]
        figures.append(
            Figure(
                key,
                pairs_ratio(ms[key], raw),
                f"{_spread(ms[key], '.0f')} ms ({label}) vs {_spread(raw, '.0f')} ms (raw),"
                f" N = {n:,}; session {_gc_text(gcs[key])}; raw {_gc_text(gcs[f'raw.{how}'])};"
                f" outside GC pauses {outside_gc(key):.0f} vs {outside_gc(f'raw.{how}'):.0f} ms",
                f"raw Trio {statistics.median(raw):.0f} ms",
                {"n": n, "session_ms": ms[key], "raw_ms": raw, "gc": gcs[key]},
            )
        )
    return figures


def memory_figure(n: int, rounds: int) -> Figure:
    """``memory.backoff``: live bytes per session in backoff vs per raw floor, per round."""
    measure_memory(SESSION, min(n, 20), breakdown=False)  # warm up imports and caches
    raw: list[float] = []
    ses: list[float] = []
    for _ in range(rounds):
        raw.append(measure_memory(RAW, n, breakdown=False).bytes_per_task / 1024)
        ses.append(measure_memory(SESSION, n, breakdown=False).bytes_per_task / 1024)
    return Figure(
        "memory.backoff",
        pairs_ratio(ses, raw),
        f"{_spread(ses, '.1f')} KiB per session in backoff vs {_spread(raw, '.1f')} KiB raw"
        f" (tracemalloc, N = {n:,})",
        f"raw Trio {statistics.median(raw):.1f} KiB",
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


def first_try_figure(rounds: int, batches: int, turns: int) -> Figure:
    """``first_try.overhead`` as the goal is worded: the session's overhead over the bare
    loop ÷ the overhead of one ``CancelScope`` around the bare loop, per round."""
    kinds = {"bare": agent_turns, "bare+scope": scoped_agent_turns, "session": session_turns}

    async def main() -> list[dict[str, list[int]]]:
        for run in kinds.values():  # warm up
            await run(turns)
        out = []
        for _ in range(rounds):
            found: dict[str, list[int]] = {k: [] for k in kinds}
            for i in range(batches):
                for kind in list(kinds) if i % 2 == 0 else list(kinds)[::-1]:
                    found[kind] += await kinds[kind](turns)
            out.append(found)
        return out

    gc.collect()
    done = trio.run(main)
    med = [{k: statistics.median(v) / 1e3 for k, v in r.items()} for r in done]
    session_over = [m["session"] - m["bare"] for m in med]
    scope_over = [m["bare+scope"] - m["bare"] for m in med]
    bare = [m["bare"] for m in med]
    return Figure(
        "first_try.overhead",
        pairs_ratio(session_over, scope_over),
        f"overhead per turn: session +{_spread(session_over, '.1f')} µs, one CancelScope"
        f" +{_spread(scope_over, '.1f')} µs over the bare loop's {_spread(bare, '.1f')} µs"
        f" (session ÷ bare+scope, the old reading: "
        f"{_spread([m['session'] / m['bare+scope'] for m in med])}×)",
        f"bare loop {statistics.median(bare):.1f} µs per turn",
        {"median_us": med},
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
    rounds = 2 if quick else 3
    one, _ = abort_figures(1, 100 if quick else 250, 2 if quick else 6, 1)
    figures += one
    _log(f"abort at N = 1: {time.perf_counter() - start:.1f} s")
    many, done = abort_figures(big, 1, rounds, FULL_BIG)
    figures += many
    figures += big_round_figures(done, big)
    _log(f"abort at N = {big:,}: {time.perf_counter() - start:.1f} s")
    figures += all_at_once_figures(big, rounds)
    _log(f"cancel-all at once: {time.perf_counter() - start:.1f} s")
    figures.append(memory_figure(100 if quick else 1000, rounds))
    _log(f"memory: {time.perf_counter() - start:.1f} s")
    figures.append(first_try_figure(rounds, 2 if quick else 8, 20 if quick else 50))
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
            f"{figure.key:<22} {figure.value:8.2f}  goal {goal.wanted:<8} {verdict:<6}"
            f"  rounds {', '.join(f'{r:.2f}' for r in figure.rounds)}  {figure.text}"
        )
    print(f"wall time {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
