"""Where the time of one cancellation goes: the abort path, stage by stage.

Run from the repository root::

    python benchmarks/abort_path.py                # N = 2 000 sessions, stages + garbage
    python benchmarks/abort_path.py --n 10000 --profile

``cancel_latency.py`` measures the headline figures; this script explains them.
For N tasks in their wait it cancels them one after another (as
``cancel_latency.py`` does) and time-stamps every stage of each cancellation:

* **stages** — median time from the cancelling call to each point of the path
  (``auto_retry_end`` at the subscriber, ``prompt()`` returned, ``open_session``
  exited, the task gone, the controller resumed), and the round's total per task;
* **shapes** — the same measurement for plain-trio skeletons with the session's
  *shape* (run scope, then nursery → chain task → the wait's scope, and the
  ``open_session`` nursery around it) but none of its code, so the cost of the
  structure and the cost of the library's own code can be told apart;
* **garbage** — what the cycle collector has to do because of the path: gen-0
  collections during the loop (and how many objects they had to scan), objects
  left as cyclic garbage per task, and how long the next full collection takes;
* ``--profile`` — cProfile of the cancel loops, own time grouped by package.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import statistics
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio
import trio.testing
from _bench import Probe, machine_info, unit_f_ns
from cancel_latency import SESSION_SETTINGS, SLEEP_S, Register, Target, _backoff_provider

from trio_session import SessionEvent, open_session

StagedRunner = Callable[["Stages", Register], Coroutine[Any, Any, None]]

CANCEL_RETURNED = "cancel call returned"
CONTROLLER_RESUMED = "controller resumed"


class Stages(Probe):
    """A probe that also time-stamps named points of the path."""

    __slots__ = ("marks",)

    def __init__(self) -> None:
        super().__init__()
        self.marks: list[tuple[str, int]] = []

    def mark(self, label: str) -> None:
        """Record that the cancellation reached ``label`` now."""
        self.marks.append((label, time.perf_counter_ns()))


# -- what is measured -------------------------------------------------------------------


async def floor_scope(probe: Stages, register: Register) -> None:
    """The floor: a bare cancel scope around a long sleep."""
    with trio.CancelScope() as scope:
        register(Target(scope.cancel))
        await trio.sleep(SLEEP_S)
    probe.mark("waiter resumed after its `with`")
    probe.hit()
    probe.end()


async def _shape_chain(scope: trio.CancelScope, probe: Stages) -> None:
    try:
        with scope:  # the wait's scope: abort_retry() cancels it, its deadline ends the wait
            scope.deadline = trio.current_time() + SLEEP_S
            await trio.sleep_forever()
    finally:
        probe.mark("chain's finally (where auto_retry_end is emitted)")


async def _shape_prompt(probe: Stages, register: Register) -> None:
    with trio.CancelScope():  # the first run's scope, left before the nursery opens
        await trio.lowlevel.checkpoint()
    async with trio.open_nursery() as nursery:  # the run from here on
        chain = trio.CancelScope()
        register(Target(chain.cancel))
        nursery.start_soon(_shape_chain, chain, probe)
    probe.mark("prompt shape returned")


async def shape_prompt(probe: Stages, register: Register) -> None:
    """Plain trio in the shape of ``prompt()``: run scope, then nursery, chain task, the
    wait's scope."""
    await _shape_prompt(probe, register)
    probe.hit()
    probe.end()


@contextmanager
def _unwrap() -> Iterator[None]:
    try:
        yield
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise


@asynccontextmanager
async def _shape_open() -> AsyncIterator[None]:
    with _unwrap():
        async with trio.open_nursery():
            yield


async def shape_session(probe: Stages, register: Register) -> None:
    """The prompt shape inside an ``open_session`` shape: async CM, unwrap, nursery."""
    async with _shape_open():
        await _shape_prompt(probe, register)
    probe.mark("open_session shape exited")
    probe.hit()
    probe.end()


async def session_a(probe: Stages, register: Register) -> None:
    """(a) ``abort_retry()`` on a session in backoff."""
    await _session(probe, register, abort=False)


async def session_b(probe: Stages, register: Register) -> None:
    """(b) ``await abort()`` on a session in backoff."""
    await _session(probe, register, abort=True)


async def _session(probe: Stages, register: Register, *, abort: bool) -> None:
    def on_event(event: SessionEvent) -> None:
        if event.type == "auto_retry_end":
            probe.mark("auto_retry_end at the subscriber")

    async with open_session(_backoff_provider(), settings=SESSION_SETTINGS) as session:
        session.subscribe(on_event)
        register(
            Target(session.abort if abort else session.abort_retry, lambda: session.is_retrying)
        )
        await session.prompt("hi")
        probe.mark("prompt() returned")
    probe.mark("open_session exited")
    probe.hit()
    probe.end()


SCENARIOS: dict[str, StagedRunner] = {
    "floor_scope": floor_scope,
    "shape_prompt": shape_prompt,
    "shape_session": shape_session,
    "session_abort_retry (a)": session_a,
    "session_abort (b)": session_b,
}


# -- one round --------------------------------------------------------------------------


@dataclass(slots=True)
class RoundStats:
    """Stages, total and collector activity of one round."""

    stages: list[tuple[str, float]]
    total_per_task_us: float
    gc: dict[str, Any]
    garbage: Counter[str]


class _GcWatch:
    """Collections during the loop: pauses, and the population each one had to scan."""

    def __init__(self, census: bool) -> None:
        self.census = census
        self.rows: list[tuple[int, int, int, float]] = []  # gen, scanned, collected, ms
        self._start = 0
        self._scanned = 0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._scanned = len(gc.get_objects(info["generation"])) if self.census else -1
            self._start = time.perf_counter_ns()
        else:
            ms = (time.perf_counter_ns() - self._start) / 1e6
            self.rows.append((info["generation"], self._scanned, info["collected"], ms))


async def _round(
    runner: StagedRunner, n: int, *, census: bool, profile: cProfile.Profile | None
) -> RoundStats:
    """Cancel ``n`` tasks one by one; with ``census``, also count what the collector sees."""
    probes = [Stages() for _ in range(n)]
    slots: list[Target | None] = [None] * n

    def setter(i: int) -> Register:
        def register(target: Target) -> None:
            slots[i] = target

        return register

    async with trio.open_nursery() as nursery:
        for i, probe in enumerate(probes):
            nursery.start_soon(runner, probe, setter(i))
        await trio.testing.wait_all_tasks_blocked()
        targets = [t for t in slots if t is not None and t.ready()]
        if len(targets) != n:
            msg = f"only {len(targets)} of {n} tasks reached their wait"
            raise RuntimeError(msg)
        gc.collect()
        watch = _GcWatch(census)
        gc.callbacks.append(watch)
        if profile is not None:
            profile.enable()
        first = time.perf_counter_ns()
        for probe, target in zip(probes, targets, strict=True):
            done = probe.done = trio.Event()
            probe.t0 = time.perf_counter_ns()
            pending = target.cancel()
            if pending is None:
                probe.mark(CANCEL_RETURNED)
            else:
                await pending
                probe.mark("abort() returned")
            await done.wait()
            probe.mark(CONTROLLER_RESUMED)
    total = time.perf_counter_ns() - first
    if profile is not None:
        profile.disable()
    gc.callbacks.remove(watch)
    by_label: dict[str, list[int]] = {}
    for probe in probes:
        for label, t in probe.marks:
            by_label.setdefault(label, []).append(t - probe.t0)
    stages = sorted(((k, statistics.median(v) / 1e3) for k, v in by_label.items()), key=_second)
    probes.clear()
    slots.clear()
    targets.clear()
    if census:
        gc.set_debug(gc.DEBUG_SAVEALL)
    start = time.perf_counter_ns()
    leftover = gc.collect()
    collect_ms = (time.perf_counter_ns() - start) / 1e6
    garbage: Counter[str] = Counter()
    if census:
        gc.set_debug(0)
        garbage.update(type(o).__qualname__ for o in gc.garbage)
        gc.garbage.clear()
    gc_stats = {
        "collections": [sum(1 for r in watch.rows if r[0] == g) for g in range(3)],
        "largest_scan": max((r[1] for r in watch.rows), default=0),
        "max_pause_ms": max((r[3] for r in watch.rows), default=0.0),
        "pause_total_ms": sum(r[3] for r in watch.rows),
        "collected_in_loop_per_task": sum(r[2] for r in watch.rows) / n,
        "left_per_task": leftover / n,
        "next_full_collection_ms": collect_ms,
    }
    return RoundStats(stages, total / n / 1e3, gc_stats, garbage)


def _second(item: tuple[str, float]) -> float:
    return item[1]


# -- the report ---------------------------------------------------------------------------


GROUPS = (
    ("trio_session", "/trio_session/"),
    ("trio core", "/trio/_core/"),
    ("trio", "/trio/"),
    ("contextlib", "/contextlib.py"),
    ("attrs", "/attr/"),
    ("outcome", "/outcome/"),
    ("benchmark", "/benchmarks/"),
)


#: This checkout's root, as the profiler's file names start with it (then left out).
REPOSITORY = str(Path(__file__).resolve().parents[1]) + "/"


def profile_report(profile: cProfile.Profile, n: int, top: int = 15) -> list[str]:
    """Own time per task grouped by package, and the top functions by own time."""
    stats = pstats.Stats(profile)
    raw: dict[tuple[str, int, str], tuple[int, int, float, float, Any]]
    raw = stats.stats  # type: ignore[attr-defined]  # pstats keeps its table untyped
    groups: dict[str, float] = {}
    rows = []
    for (filename, line, func), (_cc, calls, tottime, _cum, _callers) in raw.items():
        group = next((g for g, marker in GROUPS if marker in filename), "other (builtins…)")
        groups[group] = groups.get(group, 0.0) + tottime
        short = filename.rsplit("/site-packages/", 1)[-1].removeprefix(REPOSITORY)
        rows.append((tottime, calls, f"{short}:{line}({func})"))
    total = sum(groups.values())
    lines = [f"  profiled own time per task: {total / n * 1e6:.1f} µs (cProfile inflates it)"]
    for group, t in sorted(groups.items(), key=_second, reverse=True):
        lines.append(f"    {group:<22} {t / n * 1e6:8.1f} µs  {100 * t / total:5.1f} %")
    lines.append("  top functions by own time (µs per task, calls per task):")
    for tottime, calls, name in sorted(rows, reverse=True)[:top]:
        lines.append(f"    {tottime / n * 1e6:7.1f}  {calls / n:5.1f}  {name}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Run every scenario at N and print stages, garbage and (optionally) profiles."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--n", type=int, default=2000, help="tasks per round (default 2000)")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds per scenario")
    parser.add_argument("--profile", action="store_true", help="cProfile the session loops")
    parser.add_argument("--scenarios", help="comma-separated subset of: " + ", ".join(SCENARIOS))
    args = parser.parse_args(argv)
    chosen = list(SCENARIOS) if not args.scenarios else args.scenarios.split(",")
    info = machine_info()
    print(
        f"{info['cpu']}, {info['nproc']} CPUs, Python {info['python']}, trio {info['trio']},"
        f" trio_session source {info['trio_session_source']}; N = {args.n}"
    )
    rounds: dict[str, list[tuple[float, RoundStats]]] = {name: [] for name in chosen}
    for rep in range(args.repeats):  # alternate the order: drift hits every scenario alike
        for name in chosen if rep % 2 == 0 else chosen[::-1]:
            gc.collect()
            unit = unit_f_ns()
            rounds[name].append((unit, trio.run(_round_main, SCENARIOS[name], args.n, False, None)))
    profiles: dict[str, cProfile.Profile] = {}
    for name in chosen:
        runner = SCENARIOS[name]
        unit, timed = min(rounds[name], key=_in_f)  # the least disturbed round, judged in F
        census: RoundStats = trio.run(_round_main, runner, args.n, True, None)
        totals = ", ".join(f"{r.total_per_task_us:.0f}" for _, r in rounds[name])
        per_task = timed.total_per_task_us
        print(
            f"{name}: {per_task:.1f} µs = {per_task * 1e3 / unit:.1f} F per task for the whole"
            f" round (F = {unit / 1e3:.2f} µs; all rounds: {totals} µs)"
        )
        previous = 0.0
        for label, at in timed.stages:
            print(f"  {at:8.1f} µs {at * 1e3 / unit:6.1f} F  (+{at - previous:6.1f})  {label}")
            previous = at
        g = timed.gc
        c = census.gc
        print(
            f"  gc during the loop: {g['collections']} collections, {g['pause_total_ms']:.1f} ms,"
            f" longest {g['max_pause_ms']:.1f} ms; largest generation scanned {c['largest_scan']:,}"
            f" objects (census round)"
        )
        print(
            f"  cyclic garbage: {g['collected_in_loop_per_task']:.1f} objects/task collected"
            f" during the loop, {g['left_per_task']:.1f} left for a full collection,"
            f" which then took {g['next_full_collection_ms']:.1f} ms"
        )
        kinds = [(k, v / args.n) for k, v in census.garbage.most_common() if v >= 0.9 * args.n]
        if kinds:
            shown = ", ".join(f"{k} {v:.0f}" for k, v in kinds)
            print(f"  left in cycles after the loop, per task: {shown}")
        if args.profile and name.startswith("session"):
            profile = cProfile.Profile()
            trio.run(_round_main, runner, args.n, False, profile)
            profiles[name] = profile
        print()
    for name, profile in profiles.items():
        print(f"profile of the cancel loop: {name}")
        print("\n".join(profile_report(profile, args.n)))
        print()
    return 0


def _in_f(item: tuple[float, RoundStats]) -> float:
    unit, stats = item
    return stats.total_per_task_us / unit


async def _round_main(
    runner: StagedRunner, n: int, census: bool, profile: cProfile.Profile | None
) -> RoundStats:
    return await _round(runner, n, census=census, profile=profile)


if __name__ == "__main__":
    sys.exit(main())
