"""A retry, hop by hop, as it runs: the call stacks behind ``auto_retry_start`` and
``auto_retry_end`` (issue 40's acceptance), recorded by a subscriber.

A *hop* is a frame of a function in ``trio_session/``. For ``auto_retry_end`` (a
success, a give-up, a cancel) the hops are counted from the root of the task that
emits it to the event hub (``EventHub.emit``); for ``auto_retry_start`` they are the
path of ``AgentSession.prompt()`` to where the chain's task is started, then the chain
task's own path to the hub. ``docs/architecture.md`` ("A retry, hop by hop") and
``trio_session._retry``'s ``__init__`` print the success's trace, checked here.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType
from typing import Any

import trio
import trio.testing

import trio_session
from trio_session import AutoRetryEnd, AutoRetryStart, FauxProvider, SessionEvent, open_session

from .conftest import err, hang, ok

PACKAGE = Path(trio_session.__file__).resolve().parent
ROOT = PACKAGE.parent
HUB = PACKAGE / "_session" / "hub.py"
#: Where the agent loop streams: no retry event may be emitted from inside it.
AGENT = {PACKAGE / "_agent/loop.py", PACKAGE / "_agent_run.py", PACKAGE / "_agent/builder.py"}

#: The success's trace, as docs/architecture.md and ``_retry/__init__`` print it.
SUCCESS_TRACE = [
    "_retry/run.py:PromptRun.run_chain",
    "_retry/chain.py:RetryChain.run",
    "_retry/chain.py:RetryChain._end",
    "_session/hub.py:EventHub.emit",
]
START_TRACE = [
    "_session/facade.py:AgentSession.prompt",
    "_retry/run.py:PromptRun.run",
    "(the chain's task)",
    "_retry/run.py:PromptRun.run_chain",
    "_retry/chain.py:RetryChain.run",
    "_session/hub.py:EventHub.emit",
]


def _hop(frame: FrameType) -> str | None:
    """``path:Qualname`` of a frame in the package, else ``None``."""
    path = Path(frame.f_code.co_filename).resolve()
    if not path.is_relative_to(PACKAGE):
        return None
    return f"{path.relative_to(PACKAGE).as_posix()}:{frame.f_code.co_qualname}"


def _to_hub(frame: FrameType | None) -> list[str]:
    """The package frames from the task's root to the hub (its first frame there)."""
    hops: list[str] = []
    while frame is not None:
        hop = _hop(frame)
        if hop is not None:
            hops.append(hop)
        frame = frame.f_back
    hops.reverse()
    hub = next(i for i, h in enumerate(hops) if h.startswith("_session/hub.py:"))
    return hops[: hub + 1]


def _stack_of(task: trio.lowlevel.Task) -> list[str]:
    """The package frames of a suspended task, root first."""
    hops: list[str] = []
    coro: Any = task.coro
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is not None and (hop := _hop(frame)) is not None:
            hops.append(hop)
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return hops


class Tracer:
    """Records, at each retry event, the stack of the task emitting it."""

    def __init__(self) -> None:
        self.ends: list[tuple[AutoRetryEnd, list[str]]] = []
        self.starts: list[tuple[list[str], list[str]]] = []

    def __call__(self, event: SessionEvent) -> None:
        if isinstance(event, AutoRetryEnd):
            self.ends.append((event, _to_hub(sys._getframe(1))))
        elif isinstance(event, AutoRetryStart):
            task = trio.lowlevel.current_task()
            parent = task.parent_nursery.parent_task if task.parent_nursery else None
            spawn = _stack_of(parent) if parent is not None else []
            self.starts.append((spawn, _to_hub(sys._getframe(1))))


def _check_end(tracer: Tracer, end: AutoRetryEnd) -> list[str]:
    [(event, hops)] = tracer.ends
    assert event == end
    assert len(hops) <= 5, hops
    assert not [h for h in hops if (PACKAGE / h.split(":")[0]) in AGENT], hops
    return hops


async def test_success_is_announced_from_the_chain(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Issue 40: a retry's success is emitted by the chain's own loop, 4 hops from its
    task's root to the hub, none in the agent loop; the trace is the one the docs print."""
    tracer = Tracer()
    async with open_session(FauxProvider([err(), ok()])) as session:
        session.subscribe(tracer)
        await session.prompt("Hi")
    hops = _check_end(tracer, AutoRetryEnd(success=True, attempt=1))
    assert hops == SUCCESS_TRACE


async def test_give_up_is_announced_from_the_chain(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Issue 40: a chain that gives up (R-15) says so from its own loop, at most 5 hops."""
    tracer = Tracer()
    settings = {"retry": {"maxRetries": 1}}
    async with open_session(FauxProvider([err(), err()]), settings=settings) as session:
        session.subscribe(tracer)
        await session.prompt("Hi")
    _check_end(tracer, AutoRetryEnd(False, 1, "503 Service Unavailable"))


async def test_cancel_is_announced_from_the_chain(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Issue 40: a chain cancelled in its re-attempt (R-30, R-31) ends from its own
    loop, at most 5 hops, none in the agent loop."""
    tracer = Tracer()
    async with open_session(FauxProvider([err(), hang()])) as session:
        session.subscribe(tracer)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.prompt, "Hi")
            await trio.sleep(2.5)  # the re-attempt streams from t = 2
            assert session.is_retrying
            session.abort_retry()
    _check_end(tracer, AutoRetryEnd(False, 1, "Retry cancelled"))


async def test_prompt_to_the_chain_start(autojump_clock: trio.testing.MockClock) -> None:
    """Issue 40: from ``AgentSession.prompt()`` to ``auto_retry_start``, at most 5 hops:
    the prompt's path to the chain's task, then that task's path to the hub."""
    tracer = Tracer()
    async with open_session(FauxProvider([err(), ok()])) as session:
        session.subscribe(tracer)
        await session.prompt("Hi")
    [(spawn, chain)] = tracer.starts
    spawn = spawn[spawn.index("_session/facade.py:AgentSession.prompt") :]
    assert [*spawn, "(the chain's task)", *chain] == START_TRACE
    assert len(spawn) + len(chain) <= 5


def test_the_docs_print_the_recorded_trace() -> None:
    """Issue 40: docs/architecture.md and ``_retry/__init__`` print the traces above."""
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    init = (PACKAGE / "_retry" / "__init__.py").read_text(encoding="utf-8")
    for text in (doc, init):
        for hop in [*SUCCESS_TRACE, *START_TRACE]:
            assert hop in text, hop
