"""Streamed replies: time per chunk as replies grow, and the bytes the RPC server writes.

Run from the repository root::

    python benchmarks/streaming.py            # about a minute on 2 cores
    python benchmarks/streaming.py --quick    # small sizes: proves it runs

Figures (issue 15; each a ratio of two measurements taken in this process):

* ``stream.growth`` — a reply of K chunks (``FauxReply(chunks=…)``, no delays)
  through ``session.prompt()``, one ``subscribe()`` callback that reads
  ``event.delta`` of every ``message_update``. The figure is the worse of the
  two ×4 steps 5 000 → 20 000 → 80 000 chunks (time at 4K ÷ time at K; linear
  is 4). Quick: 500 → 2 000. The provider alone (below) is timed at the same
  sizes: its own growth, the floor, is given beside the figure.
* ``stream.vs_provider`` — at 20 000 chunks (quick 2 000): the throughput of
  the session (chunks/s, as above) ÷ the throughput of the provider alone.
  "Provider alone" is the same ``FauxProvider`` playing the same reply into a
  bare sink, ``await provider.stream(request, sink)``, where the sink's
  ``text(delta)`` does what the session's subscriber does (keeps the delta) and
  its other methods nothing: the provider's own per-chunk cost (its checkpoint
  between chunks) with no agent, no builder, no events and no session.
* ``stream.message`` — as ``stream.growth``, but the subscriber also reads
  ``event.message`` of every update (a reader redrawing the whole message):
  2 500 → 10 000 → 40 000 chunks.
* ``rpc.bytes_pi`` — on the wire: ``trio-session rpc`` and pi 0.73.1's ``--mode
  rpc`` spawned against the same loopback OpenAI-compatible server streaming a
  reply of 10 000 two-character chunks (quick 1 000), every byte and line each
  writes counted until its ``agent_end`` (``record_pi_wire.py``). The figure is
  the larger factor, either way, of the bytes and of the lines: pi's shape is the
  same lines within 1 % of the bytes. Pi is measured in the same run when it is
  installed, else read from ``baselines/pi_wire.json``. A peer row since issue 44
  (shown, not judged): pi 1.6.0 itself no longer sends the whole partial message with
  every update, so the lean row below is the goal.
* ``rpc.lean_growth`` — the in-process RPC server (``RpcServer`` over
  ``trio.testing.memory_stream_pair()``, merging off) with ``lean_updates=True``:
  bytes for 10 000 chunks ÷ bytes for 2 500 (quick 1 000 ÷ 250); linear is 4.

The timed replies are chunks of 6 to 10 characters (``"word123 "``, about a
streamed token or two); the RPC replies are two-character chunks (``"7 "``),
which puts the 10 000-chunk default output near the issue's 194 MB. Every
timing is the median of alternating repeats (sizes, and session against
provider, take turns), after a ``gc.collect()``.
"""

from __future__ import annotations

import argparse
import functools
import gc
import itertools
import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import trio
import trio.testing
from _bench import machine_info
from _goals import Figure
from record_pi_wire import RECORD, run_agent
from startup import pi_package

from trio_session import (
    FauxProvider,
    FauxReply,
    Model,
    SessionEvent,
    ToolCall,
    Usage,
    open_session,
)
from trio_session.providers._base import ProviderRequest
from trio_session.rpc import LineSplitter, RpcServer

MODEL = Model(id="faux-model", provider="faux")
#: Queued output is never merged or paused for in the RPC measurements.
NEVER: int = 1 << 62


def chunks(n: int) -> tuple[str, ...]:
    """``n`` two-character chunks (``"7 "``): the RPC measurements' reply."""
    return tuple(f"{i % 10} " for i in range(n))


def words(n: int) -> tuple[str, ...]:
    """``n`` chunks of 6 to 10 characters (``"word123 "``): the timed reply."""
    return tuple(f"word{i} " for i in range(n))


def _n(value: float) -> str:
    """``20000`` → ``"20 000"``."""
    return f"{value:,.0f}".replace(",", " ")


# -- time -------------------------------------------------------------------------------


class _Sink:
    """The provider-alone baseline's sink: keeps every delta, as the subscriber does.

    ``whole``: it also keeps the text so far as one new ``str`` at every delta, the
    least a reader of every update's whole message does (a ``str`` cannot grow in
    place while a reader holds it: each update's text is a copy of all before it).
    """

    def __init__(self, *, whole: bool = False) -> None:
        self.deltas: list[str] = []
        self.whole = whole
        self.so_far = ""
        self.held: list[str] = []

    def text(self, delta: str) -> None:
        self.deltas.append(delta)
        if self.whole:
            self.so_far = self.so_far + delta
            self.held[:] = [self.so_far]

    def thinking(self, delta: str) -> None:
        pass

    def thinking_signature(self, signature: str) -> None:
        pass

    def tool_call(self, call: ToolCall) -> None:
        pass

    def usage(self, usage: Usage) -> None:
        pass

    def response(self, response_id: str | None, model: str | None = None) -> None:
        pass


def session_seconds(n: int, *, read_message: bool = False) -> float:
    """Seconds for ``session.prompt()`` of an ``n``-chunk reply, deltas read by a subscriber
    (``read_message``: the subscriber also reads ``event.message`` of every update, as a
    reader that redraws the whole message does)."""
    reply = FauxReply(chunks=words(n))

    async def main() -> float:
        deltas: list[str] = []
        messages: list[object] = []

        def keep(event: SessionEvent) -> None:
            if event.type == "message_update":
                deltas.append(event.delta)
                if read_message:
                    messages[:] = [event.message]

        async with open_session(FauxProvider([reply]), MODEL) as session:
            session.subscribe(keep)
            start = time.perf_counter()
            await session.prompt("hi")
            took = time.perf_counter() - start
        assert "".join(deltas) == "".join(reply.pieces)
        return took

    gc.collect()
    return trio.run(main)


def provider_seconds(n: int, *, whole: bool = False) -> float:
    """Seconds for the same reply played by the provider alone into a bare sink
    (``whole``: one that also keeps the text so far, new at every delta)."""
    reply = FauxReply(chunks=words(n))

    async def main() -> float:
        sink = _Sink(whole=whole)
        request = ProviderRequest(model=MODEL, messages=())
        provider = FauxProvider([reply])
        start = time.perf_counter()
        await provider.stream(request, sink)
        took = time.perf_counter() - start
        assert len(sink.deltas) == n
        return took

    gc.collect()
    return trio.run(main)


def medians(
    runs: dict[str, Callable[[], float]], repeats: int
) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Each run ``repeats`` times, taking turns; the median and the samples of each."""
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            samples[name].append(run())
    return {name: statistics.median(s) for name, s in samples.items()}, samples


def growth_figure(sizes: Sequence[int], repeats: int, *, read_message: bool = False) -> Figure:
    """``stream.growth`` (``stream.message`` with ``read_message``): per round, the worse
    ×4 step of the session's time over ``sizes``; the figure is the median over rounds.

    The provider alone is timed at the same sizes, taking turns with the session: its
    growth is the floor (what the machine and Trio do with a longer stream), reported
    beside the figure. For ``read_message`` the provider plays into a sink that also
    keeps the text so far as a new string at every chunk: the copy no reader of the
    whole message escapes, which grows with the square of the chunks.
    """
    runs: dict[str, Callable[[], float]] = {}
    for n in sizes:
        runs[f"session {n}"] = functools.partial(session_seconds, n, read_message=read_message)
        runs[f"provider {n}"] = functools.partial(provider_seconds, n, whole=read_message)
    med, samples = medians(runs, repeats)

    def steps(kind: str, times: dict[str, float]) -> list[float]:
        return [times[f"{kind} {b}"] / times[f"{kind} {a}"] for a, b in itertools.pairwise(sizes)]

    per_round = [{name: values[r] for name, values in samples.items()} for r in range(repeats)]
    worst = tuple(max(steps("session", times)) for times in per_round)
    session, provider = steps("session", med), steps("provider", med)
    reader = "event.message" if read_message else "event.delta"
    text = f"{reader} reader: " + " → ".join(f"{med[f'session {n}']:.3f} s" for n in sizes)
    text += " for " + " → ".join(_n(n) for n in sizes) + " chunks (steps of the medians "
    text += ", ".join(f"×{s:.2f}" for s in session)
    alone = "provider alone into a whole-text reader" if read_message else "provider alone"
    text += f"; {alone} " + ", ".join(f"×{s:.2f}" for s in provider) + ")"
    return Figure(
        "stream.message" if read_message else "stream.growth",
        worst,
        text,
        f"{alone}, worst step ×{max(provider):.2f}",
        {
            "sizes": list(sizes),
            "median_s": med,
            "samples_s": samples,
            "steps": session,
            "provider_steps": provider,
        },
    )


def vs_provider_figure(n: int, repeats: int) -> Figure:
    """``stream.vs_provider``: session throughput ÷ provider-alone throughput at ``n``.

    The figure is the median of the ratios of runs taken back to back (provider, then
    session), so that a busy phase of the machine weighs on both sides of each ratio.
    """
    med, samples = medians(
        {"provider": lambda: provider_seconds(n), "session": lambda: session_seconds(n)},
        repeats,
    )
    ratios = [p / s for p, s in zip(samples["provider"], samples["session"], strict=True)]
    text = (
        f"{_n(n / med['session'])} vs {_n(n / med['provider'])} chunks/s "
        f"(session vs provider alone, medians, {_n(n)} chunks)"
    )
    return Figure(
        "stream.vs_provider",
        tuple(ratios),
        text,
        f"provider alone {_n(n / med['provider'])} chunks/s",
        {"chunks": n, "median_s": med, "samples_s": samples, "ratios": ratios},
    )


# -- RPC bytes ----------------------------------------------------------------------------

_UPDATE = b'{"type":"message_update"'
_END = b'{"type":"agent_end"'


def rpc_bytes(n: int, *, lean: bool) -> dict[str, int]:
    """Bytes the in-process RPC server writes for an ``n``-chunk reply, ``prompt`` to
    ``agent_end``: ``{"total", "updates"}``."""
    reply = FauxReply(chunks=chunks(n))
    counts = {"total": 0, "updates": 0}

    async def main() -> None:
        ours, theirs = trio.testing.memory_stream_pair()
        options: dict[str, Any] = {"lean_updates": True} if lean else {}
        server = RpcServer(
            lambda: open_session(FauxProvider([reply]), MODEL),
            theirs,
            output_high_water=NEVER,
            merge_updates_after=NEVER,
            **options,
        )
        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve)
            await ours.send_all(b'{"type":"prompt","message":"hi"}\n')
            splitter = LineSplitter(None)
            done = False
            while not done and (data := await ours.receive_some(1 << 20)):
                for line in splitter.feed(data):
                    assert isinstance(line, bytes)
                    size = len(line) + 1
                    counts["total"] += size
                    if line.startswith(_UPDATE):
                        counts["updates"] += size
                    done = done or line.startswith(_END)
            await ours.send_eof()
            while await ours.receive_some(1 << 20):
                pass

    gc.collect()
    trio.run(main)
    return counts


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{size / 1e3:.1f} kB"


def bytes_pi_figure(n: int) -> Figure:
    """``rpc.bytes_pi``: ``trio-session rpc`` ÷ pi 0.73.1, both on the wire against the
    same loopback OpenAI server (``record_pi_wire.py``), for an ``n``-chunk reply.

    The figure is the larger of the bytes and the lines factor, either way (``ours ÷ pi``
    or ``pi ÷ ours``): "pi's shape" is the same lines, within 1 % of its bytes. Pi is
    measured here when node and pi 0.73.1 are installed, else read from the record.
    """
    ours = run_agent("ours", n)
    if pi_package() is not None:
        pi = run_agent("pi", n)
        source = "pi measured in this run"
    else:
        pi = json.loads(RECORD.read_text(encoding="utf-8"))
        source = f"pi recorded {pi['recorded'][:10]} ({RECORD.name})"
        if pi["chunks"] != n:
            text = f"skipped: the record is for {pi['chunks']} chunks, not {_n(n)}"
            return Figure("rpc.bytes_pi", (math.nan,), text, source, {"ours": ours})

    def either_way(a: float, b: float) -> float:
        return max(a / b, b / a)

    factor = max(either_way(ours["bytes"], pi["bytes"]), either_way(ours["lines"], pi["lines"]))
    text = (
        f"ours {_mb(ours['bytes'])} in {_n(ours['lines'])} lines"
        f" ({_n(ours['lines_by_type'].get('message_update', 0))} message_update) vs pi"
        f" {_mb(pi['bytes'])} in {_n(pi['lines'])} lines"
        f" ({_n(pi['lines_by_type'].get('message_update', 0))} message_update), {_n(n)} chunks"
        f" on the wire; {source}"
    )
    return Figure(
        "rpc.bytes_pi",
        (factor,),
        text,
        f"pi {_mb(pi['bytes'])}, {_n(pi['lines'])} lines",
        {"chunks": n, "ours": ours, "pi": pi, "source": source},
    )


def lean_growth_figure(small: int) -> Figure:
    """``rpc.lean_growth``: lean output bytes at 4 × ``small`` chunks ÷ at ``small``."""
    a, b = rpc_bytes(small, lean=True), rpc_bytes(4 * small, lean=True)
    default = rpc_bytes(4 * small, lean=False)
    ratio = b["total"] / a["total"]
    text = (
        f"{_mb(a['total'])} → {_mb(b['total'])} for {_n(small)} → {_n(4 * small)} chunks "
        f"(default shape: {_mb(default['total'])})"
    )
    return Figure(
        "rpc.lean_growth",
        (ratio,),
        text,
        "linear: ×4",
        {"chunks": [small, 4 * small], "lean": [a, b], "default_at_4x": default},
    )


# -- the module's interface ------------------------------------------------------------------


def measure(quick: bool) -> list[Figure]:
    """The five figures of this module (``quick``: small sizes, one repeat)."""
    if quick:
        return [
            growth_figure([500, 2000], 1),
            growth_figure([250, 1000], 1, read_message=True),
            vs_provider_figure(2000, 1),
            bytes_pi_figure(1000),
            lean_growth_figure(250),
        ]
    return [
        growth_figure([5000, 20000, 80000], 5),
        growth_figure([2500, 10000, 40000], 3, read_message=True),
        vs_provider_figure(20000, 9),
        bytes_pi_figure(10000),
        lean_growth_figure(2500),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Measure, print every figure beside its goal."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small sizes, one repeat")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    info: dict[str, Any] = machine_info()
    print(f"python {info['python']}, trio {info['trio']}, {info['nproc']} CPUs, {info['cpu']}")
    for figure in measure(args.quick):
        goal = figure.goal
        verdict = "met" if goal.met(figure.value) else "NOT MET"
        if args.quick or math.isnan(figure.value):
            verdict = "ran"
        elif goal.target is None:
            verdict = "shown, not judged"
        print(f"{figure.key:<20} {figure.value:8.3f}{goal.unit}  goal {goal.wanted:<8} {verdict}")
        print(f"{'':<20} {figure.text}")
    print(f"wall time {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
