"""The peer table: one cancellation, trio_session against raw Trio, asyncio and node.

Run from the repository root::

    python benchmarks/peers.py            # 5 rounds of 250 samples per series
    python benchmarks/peers.py --quick    # 2 rounds of 40: proves it runs

One session (or task) waits in a 60 s sleep; the controller cancels it and the sample is
the time until the waiter resumes, in µs from the same clock on each side:

* raw Trio — PERF-NOTES' floor (``cancel_latency.floor_nursery``);
* trio_session — ``await session.abort()`` in backoff → ``prompt()`` returned;
* asyncio session — the same shape in asyncio: the prompt's ``TaskGroup`` holds a chain
  task sleeping under ``asyncio.timeout``; ``task.cancel()`` on the chain, the prompt
  resumes after its ``async with``;
* raw asyncio — ``task.cancel()`` on a task in ``asyncio.sleep``;
* node — ``setTimeout`` of ``node:timers/promises`` with an ``AbortSignal``, its
  ``AbortController.abort()``, the waiter resumes in its ``catch`` (``peer_node.mjs``,
  ``process.hrtime.bigint()``).

Every round runs each series once, in a fresh event loop (node: a fresh process), the
order rotating; each series' figure is, per round, its median µs ÷ the raw Trio median µs
of the same round, and the table gives the median and spread over rounds. Peer rows are
shown, not judged.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from _bench import Probe
from _goals import Figure, pairs_ratio
from cancel_latency import BY_KEY, SLEEP_S, Register, Series, Target, run_block

HERE = Path(__file__).resolve().parent


async def asyncio_session(probe: Probe, register: Register) -> None:
    """An asyncio session's shape: a TaskGroup holding the chain, its sleep under
    ``asyncio.timeout``; cancelling the chain task, the prompt resumes after the group."""

    async def chain() -> None:
        async with asyncio.timeout(SLEEP_S):
            await asyncio.sleep(SLEEP_S * 2)

    async with asyncio.TaskGroup() as group:
        task = group.create_task(chain())

        def cancel() -> None:
            task.cancel()

        register(Target(cancel))
    probe.hit()
    probe.end()


ASYNCIO_SESSION = Series(
    "asyncio_session", "asyncio TaskGroup + timeout", "asyncio", asyncio_session, measures="b"
)

#: key in the table → the series (None: node)
SERIES: dict[str, Series | None] = {
    "raw": BY_KEY["floor_nursery"],
    "peer.session": BY_KEY["session_abort"],
    "peer.asyncio_taskgroup": ASYNCIO_SESSION,
    "peer.asyncio_cancel": BY_KEY["asyncio_task_cancel"],
    "peer.node_abort": None,
}
LABELS = {
    "raw": "raw Trio: cs.cancel() → waiter resumes",
    "peer.session": "trio_session: abort() → prompt() resumes",
    "peer.asyncio_taskgroup": "asyncio TaskGroup + asyncio.timeout session",
    "peer.asyncio_cancel": "raw asyncio: Task.cancel()",
    "peer.node_abort": "node: setTimeout + AbortController",
}


def node_block(samples: int) -> float | None:
    """Median µs of ``samples`` node aborts in a fresh node, or None without node."""
    node = shutil.which("node")
    if node is None:
        return None
    out = subprocess.run(
        [node, str(HERE / "peer_node.mjs"), str(samples)],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(statistics.median(json.loads(out.stdout))) / 1e3


def measure_rounds(rounds: int, samples: int) -> dict[str, list[float]]:
    """Per series, the median µs of each round (order rotating round by round)."""
    keys = list(SERIES)
    found: dict[str, list[float]] = {key: [] for key in keys}
    for r in range(rounds):
        shift = r % len(keys)
        for key in keys[shift:] + keys[:shift]:
            series = SERIES[key]
            if series is None:
                median = node_block(samples)
                if median is None:
                    continue
            else:
                _, done = run_block(series, 1, samples)
                median = statistics.median(x for d in done for x in d.latencies_ns) / 1e3
            found[key].append(median)
    return found


def figures(found: dict[str, list[float]]) -> list[Figure]:
    """One peer figure per series: its µs ÷ raw Trio's µs, round by round."""
    raw = found["raw"]
    out = []
    for key, values in found.items():
        if key == "raw" or not values:
            continue
        text = (
            f"{LABELS[key]}: p50 {statistics.median(values):.1f} µs"
            f" [{min(values):.1f}–{max(values):.1f}] vs raw Trio"
            f" {statistics.median(raw):.1f} µs [{min(raw):.1f}–{max(raw):.1f}]"
        )
        out.append(
            Figure(
                key,
                pairs_ratio(values, raw),
                text,
                f"raw Trio {statistics.median(raw):.1f} µs",
                {"median_us": values, "raw_us": raw},
            )
        )
    return out


def measure(quick: bool) -> list[Figure]:
    """The peer figures (``quick``: 2 rounds of 40 samples)."""
    return figures(measure_rounds(2, 40) if quick else measure_rounds(5, 250))


def main(argv: Sequence[str] | None = None) -> int:
    """Measure and print the peer table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="2 rounds of 40 samples")
    args = parser.parse_args(argv)
    for figure in measure(args.quick):
        spread = f"[{min(figure.rounds):.2f}–{max(figure.rounds):.2f}]"
        print(f"{figure.value:6.2f}× raw Trio {spread:<13} {figure.text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
