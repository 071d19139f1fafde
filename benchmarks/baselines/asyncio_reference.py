"""The reference's retry algorithm, transcribed to asyncio: a baseline for the benchmarks.

The reference ("pi" coding agent, restated in docs/spec.md §3-§6) keeps a retry chain
alive with four loose fields on the session. Here they map one to one:

=================================  ==============================================
reference (TypeScript)             this module (asyncio)
=================================  ==============================================
``_retryAttempt: number``          :attr:`RefSession.retry_attempt`
``_retryPromise: Promise<void>``   ``RefSession._retry_future`` (``asyncio.Future``)
``_retryResolve()``                ``RefSession._resolve_retry()`` (``set_result``)
``_retryAbortController``          ``RefSession._retry_abort`` (an ``asyncio.Event``)
``sleep(ms, signal)``              :func:`abortable_sleep`: the sleep raced with the event
``setTimeout(continue, 0)``        ``loop.call_soon`` starting a fresh task
``abortRetry()``                   :meth:`RefSession.abort_retry`: set the event, resolve
``abort()``                        :meth:`RefSession.abort`: abortRetry, agent abort, idle
=================================  ==============================================

As in the reference, the chain is not a child of anything: the agent's event
listener starts it (synchronously up to the sleep, as a JavaScript ``async``
function runs up to its first ``await``) and its continuation floats as a task;
``prompt()`` waits for the promise, which ``abort_retry()`` resolves at once —
so ``prompt()`` may return before ``auto_retry_end`` is emitted.

It is deliberately minimal — plain dicts for events and messages (the
reference's object literals), one scripted reply per request, no tools,
settings, history, compaction or credentials — so it is a *lower bound* on what
an asyncio implementation costs, in time and in memory per session.

``python benchmarks/baselines/asyncio_reference.py`` runs a short demo.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

Event = dict[str, Any]
Message = dict[str, Any]
Listener = Callable[[Event], None]
Race = Literal["timeout", "wait"]

#: The reference's retryable-error pattern (SPEC R-5).
RETRYABLE = re.compile(
    r"overloaded|rate.?limit|usage.?limit|too many requests|429|500|502|503|504"
    r"|service.?unavailable|server error|internal error|connection.?error|fetch failed"
    r"|retry delay",
    re.IGNORECASE,
)

CANCELLED = "Retry cancelled"


async def abortable_sleep(seconds: float, abort: asyncio.Event, *, race: Race = "timeout") -> bool:
    """The reference's ``sleep(ms, signal)``: wait ``seconds`` unless ``abort`` is set first.

    ``race="timeout"`` waits on the event under ``asyncio.timeout(seconds)`` — one
    future and one timer handle, like ``setTimeout`` plus an abort listener.
    ``race="wait"`` runs ``asyncio.sleep`` and ``abort.wait()`` as two tasks under
    ``asyncio.wait(..., return_when=FIRST_COMPLETED)`` and cancels the loser.

    Returns:
        True if the whole delay passed, False if it was aborted.
    """
    if abort.is_set():
        return False
    if race == "timeout":
        try:
            async with asyncio.timeout(seconds):
                await abort.wait()
        except TimeoutError:
            return True
        return False
    sleeper = asyncio.create_task(asyncio.sleep(seconds))
    waiter = asyncio.create_task(abort.wait())
    done, pending = await asyncio.wait({sleeper, waiter}, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    return sleeper in done and waiter not in done


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted answer: ``text``, or an error with ``error`` as its errorMessage."""

    text: str = ""
    error: str | None = None


class RefAgent:
    """The agent loop, reduced to one request per run, emitting the agent's events."""

    def __init__(self, script: Iterable[Reply], listener: Listener) -> None:
        self.messages: list[Message] = []
        self._script = list(script)
        self._listener = listener
        self._idle = asyncio.Event()
        self._idle.set()
        self._abort: asyncio.Event | None = None

    def extend(self, replies: Iterable[Reply]) -> None:
        """Add replies to the end of the script."""
        self._script.extend(replies)

    async def prompt(self, text: str) -> Message:
        """Add a user message and run."""
        return await self._run({"role": "user", "content": text})

    async def continue_(self) -> Message:
        """Run again on the context as it is (a retry re-attempt)."""
        return await self._run(None)

    def abort(self) -> None:
        """Abort the in-flight request, if any."""
        if self._abort is not None:
            self._abort.set()

    async def wait_for_idle(self) -> None:
        """Return when no run is in progress."""
        await self._idle.wait()

    async def _run(self, new: Message | None) -> Message:
        self._idle.clear()
        abort = self._abort = asyncio.Event()
        emit = self._listener
        try:
            emit({"type": "agent_start"})
            emit({"type": "turn_start"})
            if new is not None:
                self.messages.append(new)
                emit({"type": "message_start", "message": new})
                emit({"type": "message_end", "message": new})
            message = await self._request(abort)
            self.messages.append(message)
            emit({"type": "message_end", "message": message})
            emit({"type": "turn_end", "message": message})
            emit({"type": "agent_end", "messages": [message]})
        finally:
            self._abort = None
            self._idle.set()
        return message

    async def _request(self, abort: asyncio.Event) -> Message:
        reply = self._script.pop(0) if self._script else Reply(error="script exhausted")
        self._listener({"type": "message_start", "message": {"role": "assistant"}})
        await asyncio.sleep(0)  # the scripted provider's one checkpoint
        if abort.is_set():
            return {"role": "assistant", "content": "", "stopReason": "aborted"}
        if reply.text:
            self._listener({"type": "message_update", "delta": reply.text})
        if reply.error is not None:
            return {
                "role": "assistant",
                "content": reply.text,
                "stopReason": "error",
                "errorMessage": reply.error,
            }
        return {"role": "assistant", "content": reply.text, "stopReason": "stop"}


class RefSession:
    """The reference session's retry policy, field for field (see the module docstring)."""

    def __init__(
        self,
        script: Iterable[Reply],
        *,
        base_delay_ms: int = 2000,
        max_retries: int = 3,
        enabled: bool = True,
        race: Race = "timeout",
    ) -> None:
        self.base_delay_ms = base_delay_ms
        self.max_retries = max_retries
        self.enabled = enabled
        self.race: Race = race
        self.retry_attempt = 0
        self.agent = RefAgent(script, self._handle_agent_event)
        self._subscribers: list[Listener] = []
        self._retry_future: asyncio.Future[None] | None = None
        self._retry_abort: asyncio.Event | None = None
        self._chain_task: asyncio.Task[None] | None = None
        self._last_assistant: Message | None = None
        self.sleeping = False

    # -- events ----------------------------------------------------------------

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Call ``listener(event)`` for every event; returns the unsubscribe function."""
        self._subscribers.append(listener)

        def unsubscribe() -> None:
            if listener in self._subscribers:
                self._subscribers.remove(listener)

        return unsubscribe

    def _emit(self, event: Event) -> None:
        for listener in tuple(self._subscribers):
            listener(event)

    def _handle_agent_event(self, event: Event) -> None:
        self._emit(event)
        kind = event["type"]
        if kind == "message_end" and event["message"]["role"] == "assistant":
            message = event["message"]
            self._last_assistant = message
            if message["stopReason"] not in ("error", "aborted") and self.retry_attempt > 0:
                self._emit(
                    {"type": "auto_retry_end", "success": True, "attempt": self.retry_attempt}
                )
                self.retry_attempt = 0
                self._resolve_retry()
        elif kind == "agent_end" and self._last_assistant is not None:
            message, self._last_assistant = self._last_assistant, None
            if message["stopReason"] == "error" and RETRYABLE.search(message["errorMessage"]):
                self._handle_retryable_error(message)

    # -- the chain ---------------------------------------------------------------

    def _handle_retryable_error(self, message: Message) -> None:
        """The synchronous head of the reference's ``_handleRetryableError``."""
        if not self.enabled:
            return
        self.retry_attempt += 1
        if self.retry_attempt == 1 and self._retry_future is None:
            self._retry_future = asyncio.get_running_loop().create_future()
        if self.retry_attempt > self.max_retries:
            self._emit(
                {
                    "type": "auto_retry_end",
                    "success": False,
                    "attempt": self.retry_attempt - 1,
                    "finalError": message["errorMessage"],
                }
            )
            self.retry_attempt = 0
            self._resolve_retry()
            return
        delay_ms = self.base_delay_ms * 2 ** (self.retry_attempt - 1)
        self._emit(
            {
                "type": "auto_retry_start",
                "attempt": self.retry_attempt,
                "maxAttempts": self.max_retries,
                "delayMs": delay_ms,
                "errorMessage": message["errorMessage"],
            }
        )
        if self.agent.messages and self.agent.messages[-1] is message:
            self.agent.messages.pop()  # drop the error from the context
        abort = self._retry_abort = asyncio.Event()
        self._chain_task = asyncio.create_task(self._sleep_then_continue(delay_ms, abort))

    async def _sleep_then_continue(self, delay_ms: int, abort: asyncio.Event) -> None:
        """The tail of ``_handleRetryableError``: the abortable sleep, then continue."""
        self.sleeping = True
        try:
            slept = await abortable_sleep(delay_ms / 1000, abort, race=self.race)
        finally:
            self.sleeping = False
        if not slept:
            attempt = self.retry_attempt
            self.retry_attempt = 0
            self._retry_abort = None
            self._emit(
                {
                    "type": "auto_retry_end",
                    "success": False,
                    "attempt": attempt,
                    "finalError": CANCELLED,
                }
            )
            self._resolve_retry()
            return
        self._retry_abort = None
        asyncio.get_running_loop().call_soon(self._continue_soon)  # setTimeout(…, 0)

    def _continue_soon(self) -> None:
        self._chain_task = asyncio.create_task(self._continue())

    async def _continue(self) -> None:
        await self.agent.continue_()

    def _resolve_retry(self) -> None:
        future, self._retry_future = self._retry_future, None
        if future is not None and not future.done():
            future.set_result(None)

    # -- public API ----------------------------------------------------------------

    async def prompt(self, text: str) -> Message:
        """Run the agent, then wait for the retry promise, as the reference does."""
        await self.agent.prompt(text)
        await self.wait_for_retry()
        return self.agent.messages[-1] if self.agent.messages else {}

    async def wait_for_retry(self) -> None:
        """``waitForRetry()``: await the chain's promise if there is one."""
        if self._retry_future is not None:
            await self._retry_future

    def abort_retry(self) -> None:
        """``abortRetry()``: abort the sleep and resolve the promise."""
        if self._retry_abort is not None:
            self._retry_abort.set()
        self._resolve_retry()

    async def abort(self) -> None:
        """``abort()``: cancel any retry, abort the agent, wait until it is idle."""
        self.abort_retry()
        self.agent.abort()
        await self.agent.wait_for_idle()


async def _demo() -> None:
    def show(event: Event) -> None:
        if event["type"] in ("agent_end", "auto_retry_start", "auto_retry_end"):
            shown = {k: v for k, v in event.items() if k != "messages"}
            print(f"{asyncio.get_running_loop().time() - start:6.3f}s  {shown}")

    loop = asyncio.get_running_loop()
    start = loop.time()
    error = Reply(error="503 Service Unavailable")
    session = RefSession([error, error, Reply(text="Hello!")], base_delay_ms=10)
    session.subscribe(show)
    print("two 503s, then an answer:", await session.prompt("Say hello"))

    start = loop.time()
    session = RefSession([error, Reply(text="never sent")], base_delay_ms=60_000)
    session.subscribe(show)
    prompt = asyncio.create_task(session.prompt("Say hello"))
    for _ in range(100):  # until the chain is in its backoff sleep
        if session.sleeping:
            break
        await asyncio.sleep(0)
    session.abort_retry()
    print("aborted in backoff:", await prompt)


if __name__ == "__main__":
    asyncio.run(_demo())
