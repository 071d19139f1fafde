"""Shared pieces of the benchmark scripts: samples, statistics, the unit F, GC and memory.

Every latency is a pair of ``time.perf_counter_ns()`` readings taken in the same
process: ``t0`` just before the cancelling call, ``t1`` where the woken side
observes it. Results are reported as medians and tails, in µs and in **F**, one
``await trio.lowlevel.checkpoint()`` measured in the same process (PERF-NOTES):
ratios inside one run survive the drift of a noisy machine, absolute µs do not.
"""

from __future__ import annotations

import gc
import hashlib
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import trio

import trio_session

RESULTS_DIR = Path(__file__).resolve().parent / "results"


class Settable(Protocol):
    """What a probe wakes its controller with: a ``trio.Event`` or an ``asyncio.Event``."""

    def set(self) -> None: ...


class Probe:
    """One measured cancellation: when it was asked for, and when it was seen.

    The controller arms the probe (``done`` = a fresh event), takes ``t0`` and
    cancels. The observer calls :meth:`hit` where the cancellation becomes
    visible (``t1``); the task under test calls :meth:`end` as its very last
    action. ``done`` is set once both happened, so the next sample starts from a
    quiet scheduler: nothing of the previous session is still unwinding.
    """

    __slots__ = ("done", "ended", "t0", "t1", "t_called")

    def __init__(self) -> None:
        self.t0 = 0
        self.t_called = 0
        self.t1 = 0
        self.ended = False
        self.done: Settable | None = None

    def hit(self) -> None:
        """The cancellation is visible here: record ``t1`` (the first time only)."""
        if not self.t1:
            self.t1 = time.perf_counter_ns()
            if self.ended and self.done is not None:
                self.done.set()

    def end(self) -> None:
        """The task under test is about to exit."""
        self.ended = True
        if self.t1 and self.done is not None:
            self.done.set()


def percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted, non-empty sequence."""
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


def summarize(samples_ns: Sequence[int], samples_f: Sequence[float]) -> dict[str, float]:
    """Median, p99, max and mean of latencies in µs, and median, p99, max in F.

    ``samples_f`` are the same samples, each divided by the F measured around
    its own block, so the figures in F do not move with the machine's load.
    """
    ordered = sorted(samples_ns)
    in_f = sorted(samples_f)
    return {
        "samples": len(ordered),
        "median_us": statistics.median(ordered) / 1e3,
        "p99_us": percentile(ordered, 0.99) / 1e3,
        "max_us": ordered[-1] / 1e3,
        "mean_us": statistics.fmean(ordered) / 1e3,
        "median_F": statistics.median(in_f),
        "p99_F": percentile(in_f, 0.99),
        "max_F": in_f[-1],
    }


async def checkpoint_loop_ns(iterations: int) -> float:
    """Nanoseconds per ``await trio.lowlevel.checkpoint()``, over one loop."""
    start = time.perf_counter_ns()
    for _ in range(iterations):
        await trio.lowlevel.checkpoint()
    return (time.perf_counter_ns() - start) / iterations


async def measure_unit_f(*, batches: int = 7, iterations: int = 5000) -> float:
    """Unit F in ns: the median of ``batches`` checkpoint loops (PERF-NOTES)."""
    await checkpoint_loop_ns(iterations // 5)  # warm up
    return statistics.median([await checkpoint_loop_ns(iterations) for _ in range(batches)])


def unit_f_ns(*, batches: int = 3, iterations: int = 500) -> float:
    """Unit F in ns, measured in a fresh ``trio.run`` (callable between event loops)."""

    async def main() -> float:
        return await measure_unit_f(batches=batches, iterations=iterations)

    return trio.run(main)


def rss_bytes() -> int:
    """Resident set size of this process, from ``/proc/self/statm``."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            resident_pages = int(statm.read().split()[1])
    except OSError:  # not Linux: no RSS figure
        return 0
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


class GcMonitor:
    """Counts garbage collections and their pause times while it is active.

    Uses ``gc.callbacks``; the cost of the callback itself is two
    ``perf_counter_ns()`` calls per collection.
    """

    def __init__(self) -> None:
        self.pauses_ns: list[int] = []
        self.by_generation = [0, 0, 0]
        self._started = 0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter_ns()
        elif self._started:
            self.pauses_ns.append(time.perf_counter_ns() - self._started)
            self.by_generation[info["generation"]] += 1
            self._started = 0

    def __enter__(self) -> GcMonitor:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc_info: object) -> None:
        gc.callbacks.remove(self._callback)

    def summary(self) -> dict[str, Any]:
        """Collections per generation, total and longest pause (ms)."""
        return {
            "collections": list(self.by_generation),
            "total_ms": sum(self.pauses_ns) / 1e6,
            "max_ms": max(self.pauses_ns, default=0) / 1e6,
        }


def machine_info() -> dict[str, Any]:
    """What a reader needs to reproduce a figure: CPUs, Python, trio, load."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        load: list[float] | None = list(os.getloadavg())
    except OSError:
        load = None
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "trio": trio.__version__,
        "trio_session_source": source_fingerprint(),
        "platform": platform.platform(),
        "loadavg_at_start": load,
        "gc_thresholds": list(gc.get_threshold()),
    }


def source_fingerprint() -> str:
    """sha256 (first 12 hex digits) of trio_session's ``*.py`` files: which code was measured."""
    root = Path(trio_session.__file__).parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def write_json(name: str, data: dict[str, Any], path: Path | None = None) -> Path:
    """Write ``data`` to ``benchmarks/results/<name>.json`` (or ``path``); return the path."""
    target = path if path is not None else RESULTS_DIR / f"{name}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return target


def parse_sizes(text: str) -> list[int]:
    """``"1,10,100"`` → ``[1, 10, 100]``; each size must be a positive integer."""
    sizes = []
    for part in text.split(","):
        value = int(part.strip().replace("_", ""))
        if value < 1:
            msg = f"sizes must be positive integers, not {value!r}"
            raise ValueError(msg)
        sizes.append(value)
    return sizes
