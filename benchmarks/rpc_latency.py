"""Latency of cancelling over RPC: the real ``trio-session rpc`` process, over stdio pipes.

Run from the repository root::

    python benchmarks/rpc_latency.py                  # 200 samples per series
    python benchmarks/rpc_latency.py --samples 1000
    python benchmarks/rpc_latency.py --quick          # 20 samples: proves it runs

One server process plays a faux script; this process writes command lines to its
stdin and reads its stdout. Each sample is ``t1 - t0``, both ``perf_counter_ns()``
here: ``t0`` just before the command line is written, ``t1`` when the line that
shows the effect has been read. Series:

* pipe_echo — the floor: a minimal trio child that echoes stdin to stdout (``FdStream``
  on both), one line → the line back. What any trio process over pipes costs.
* roundtrip — ``get_state`` → its response: one command through the rpc server.
* abort_retry — a prompt in its backoff sleep (``baseDelayMs`` 600 000):
  ``abort_retry`` → the ``auto_retry_end`` event.
* abort_backoff — a prompt in its backoff sleep: ``abort`` → the abort's response,
  which the server writes after the run's last event (the run is over).
* abort_streaming — a request that hangs mid-stream: ``abort`` → the abort's response.

Before each sample the prompt is started and its state (``auto_retry_start``, or the
first ``message_update``) awaited; series take turns, so a busy phase of the machine
hits them alike. Figures are in µs and in F, one ``await trio.lowlevel.checkpoint()``
measured in this process (PERF-NOTES). The JSON goes to ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio
from _bench import machine_info, measure_unit_f, percentile, write_json
from _goals import Figure, chunked, pairs_ratio

from trio_session.rpc import LineSplitter

SERIES = ("pipe_echo", "roundtrip", "abort_retry", "abort_backoff", "abort_streaming")
#: The replies each round of samples uses, in order.
ROUND_SCRIPT: list[dict[str, Any]] = [
    {"error": "503 Service Unavailable"},  # abort_retry
    {"error": "503 Service Unavailable"},  # abort_backoff
    {"text": "partial", "hang": True},  # abort_streaming
]
WARMUP = 10
#: Samples per series of ``measure(quick=True)``: proves the benchmark runs, no more.
QUICK_SAMPLES = 20
#: The floor's child: echo stdin to stdout with trio, as the rpc server reads and writes.
ECHO_CHILD = """
import os, trio

async def main():
    stdin = trio.lowlevel.FdStream(os.dup(0))
    stdout = trio.lowlevel.FdStream(os.dup(1))
    while data := await stdin.receive_some(65536):
        await stdout.send_all(data)

trio.run(main)
"""


class Server:
    """The ``trio-session rpc`` child, spoken to line by line."""

    def __init__(self, process: trio.Process) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self.process = process
        self.stdin = process.stdin
        self.stdout = process.stdout
        self.splitter = LineSplitter(None)
        self.ready: list[bytes] = []

    async def write(self, obj: dict[str, Any]) -> int:
        """Write one command line; return ``t0``, taken just before the write."""
        line = json.dumps(obj, separators=(",", ":")).encode() + b"\n"
        t0 = time.perf_counter_ns()
        await self.stdin.send_all(line)
        return t0

    async def until(self, marker: bytes) -> int:
        """Read lines until one contains ``marker``; return when it was read (``t1``)."""
        while True:
            while self.ready:
                line = self.ready.pop(0)
                if marker in line:
                    return time.perf_counter_ns()
            data = await self.stdout.receive_some(65536)
            if not data:
                msg = "the rpc server's output ended"
                raise RuntimeError(msg)
            self.ready.extend(x for x in self.splitter.feed(data) if isinstance(x, bytes))


async def one_round(server: Server, echo: Server, n: int) -> dict[str, int]:
    """One sample of each series (the process must be idle; it is idle again after)."""
    out: dict[str, int] = {}
    t0 = await echo.write({"id": f"e{n}"})
    out["pipe_echo"] = await echo.until(f'"id":"e{n}"'.encode()) - t0

    t0 = await server.write({"id": f"s{n}", "type": "get_state"})
    out["roundtrip"] = await server.until(f'"id":"s{n}"'.encode()) - t0

    await server.write({"type": "prompt", "message": "retry me"})
    await server.until(b'"type":"auto_retry_start"')
    t0 = await server.write({"type": "abort_retry"})
    out["abort_retry"] = await server.until(b'"type":"auto_retry_end"') - t0
    await server.write({"id": f"i{n}", "type": "abort"})  # waits until the prompt is over
    await server.until(f'"id":"i{n}"'.encode())

    await server.write({"type": "prompt", "message": "retry me"})
    await server.until(b'"type":"auto_retry_start"')
    t0 = await server.write({"id": f"b{n}", "type": "abort"})
    out["abort_backoff"] = await server.until(f'"id":"b{n}"'.encode()) - t0

    await server.write({"type": "prompt", "message": "hang"})
    await server.until(b'"type":"message_update"')
    t0 = await server.write({"id": f"h{n}", "type": "abort"})
    out["abort_streaming"] = await server.until(f'"id":"h{n}"'.encode()) - t0
    return out


def summarize(samples_ns: Sequence[int], unit_f_ns: float) -> dict[str, float]:
    """Median, p90, p99 and max, in µs and in F."""
    ordered = sorted(samples_ns)
    figures = {
        "median": statistics.median(ordered),
        "p90": percentile(ordered, 0.90),
        "p99": percentile(ordered, 0.99),
        "max": ordered[-1],
    }
    out: dict[str, float] = {"samples": len(ordered)}
    for name, ns in figures.items():
        out[f"{name}_us"] = ns / 1e3
        out[f"{name}_F"] = ns / unit_f_ns
    return out


async def run(samples: int, warmup: int = WARMUP) -> dict[str, Any]:
    """Start the server, take the samples, stop it; return the results."""
    rounds = samples + warmup
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "script.json"
        script.write_text(json.dumps(ROUND_SCRIPT * rounds))
        settings = Path(tmp) / "settings.json"
        settings.write_text(json.dumps({"retry": {"baseDelayMs": 600_000}}))
        command = [sys.executable, "-m", "trio_session", "rpc", "--faux", str(script)]
        command += ["--settings", str(settings)]
        process = await trio.lowlevel.open_process(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        server = Server(process)
        echo_process = await trio.lowlevel.open_process(
            [sys.executable, "-c", ECHO_CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        echo = Server(echo_process)
        unit_before = await measure_unit_f()
        series: dict[str, list[int]] = {name: [] for name in SERIES}
        for n in range(rounds):
            sample = await one_round(server, echo, n)
            if n >= warmup:
                for name, ns in sample.items():
                    series[name].append(ns)
        unit_after = await measure_unit_f()
        await server.stdin.aclose()
        await echo.stdin.aclose()
        status = await process.wait()
        await echo_process.wait()
    unit_f = statistics.median([unit_before, unit_after])
    return {
        "benchmark": "rpc_latency",
        "machine": machine_info(),
        "unit_F_ns": unit_f,
        "server_exit_status": status,
        "series": {name: summarize(values, unit_f) for name, values in series.items()},
        # Samples were taken alternating (one of each per round), so consecutive groups of
        # them are adjacent blocks: each group's medians, for one ratio per group.
        "group_median_us": {
            name: [statistics.median(g) / 1e3 for g in chunked([float(v) for v in values], 4)]
            for name, values in series.items()
        },
    }


def table(results: dict[str, Any]) -> str:
    """The results as a plain-text table."""
    unit = results["unit_F_ns"]
    head = f"{'series':<16} {'n':>5} {'median':>16} {'p90':>16} {'p99':>16} {'max':>16}"
    rows = [f"unit F = {unit:.0f} ns (one trio checkpoint, this process)", head]
    floor = results["series"]["pipe_echo"]["median_us"]
    for name, s in results["series"].items():
        cells = [
            f"{s[f'{k}_us']:>8.1f} µs {s[f'{k}_F']:>4.0f} F"
            for k in ("median", "p90", "p99", "max")
        ]
        ratio = f"   {s['median_us'] / floor:4.1f}× the echo floor"
        rows.append(
            f"{name:<16} {s['samples']:>5.0f} " + " ".join(f"{c:>16}" for c in cells) + ratio
        )
    return "\n".join(rows)


def figures(results: dict[str, Any]) -> list[Figure]:
    """The ``rpc.abort_retry`` figure of a run: its median over the echo floor's."""
    series = results["series"]
    retry, echo = series["abort_retry"], series["pipe_echo"]
    text = (
        f"abort_retry → auto_retry_end {retry['median_us']:.0f} µs ÷ the trio echo "
        f"{echo['median_us']:.0f} µs (p99 {retry['p99_us']:.0f} µs ÷ {echo['p99_us']:.0f} µs; "
        f"n={retry['samples']:.0f})"
    )
    detail = {
        "unit_F_ns": results["unit_F_ns"],
        "series": series,
        "ratio_to_echo": {name: s["median_us"] / echo["median_us"] for name, s in series.items()},
    }
    groups = results["group_median_us"]
    return [
        Figure(
            "rpc.abort_retry",
            pairs_ratio(groups["abort_retry"], groups["pipe_echo"]),
            text,
            f"bare Trio echo {echo['median_us']:.0f} µs",
            detail,
        )
    ]


def measure(quick: bool) -> list[Figure]:
    """The ``rpc.abort_retry`` figure: 200 samples per series (``quick``: 20)."""
    if quick:
        return figures(trio.run(run, QUICK_SAMPLES, 3))
    return figures(trio.run(run, 200))


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print the table and the figure beside its goal, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--samples", type=int, default=200, help="samples per series (≥ 50)")
    parser.add_argument("--output", type=Path, help="JSON path (default: benchmarks/results/)")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_SAMPLES} samples: it runs")
    args = parser.parse_args(argv)
    if args.quick:
        results = trio.run(run, QUICK_SAMPLES, 3)
    else:
        if args.samples < 50:
            parser.error("--samples must be at least 50")
        results = trio.run(run, args.samples)
    print(table(results))
    for figure in figures(results):
        verdict = "met" if figure.goal.met(figure.value) else "NOT met"
        print(f"\n{figure.key}: {figure.value:.2f}× (goal {figure.goal.wanted}: {verdict})")
        print(f"  {figure.text}")
    path = write_json("rpc_latency", results, args.output)
    print(f"\nwritten to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
