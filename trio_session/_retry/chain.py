"""The retry chain: one task, a cancel scope per phase, exactly one ``auto_retry_end``.

The reference keeps a chain alive with four loose fields (an attempt counter, a
promise, its resolver, an AbortController for the sleep). Here a chain is a
task in the prompt's nursery, and whatever it does runs in a ``trio.CancelScope``
that ``abort_retry()`` cancels -- one per phase, so that a chain waiting out its
backoff holds one scope, not two:

```text
prompt() nursery
└── RetryChain.run()            is_retrying ⇔ the chain has not ended (R-10)
    ├── scope: the wait         abort_retry() cancels it (R-29); its deadline is the
    │   └── sleep(delay)        delay's end; retry_now() ends it early (R-34a)
    └── scope: the re-attempt   abort_retry() cancels it (R-31)
        └── the agent's run     its first answer decides: a good one is the chain's
                                success, announced here before its tools (R-23a)
```

``abort_retry()`` marks the chain aborted and cancels the scope it is in, or is about
to enter (the next is made as the last is left, with no checkpoint between, and is born
cancelled once the chain is marked). A wait that ends by its deadline or by
``retry_now()`` leaves the chain unmarked, and the re-attempt follows.

The loop is SPEC §3 in order: read settings (R-11), end if ``decide`` gave up (its
one max check, R-13, R-15), count the attempt, compute the delay (R-16, R-28), share a server's wait
hint and wait at least what is left of the key's shared cooldown
(``retry.sharedCooldown``), rotate the credential on a usage limit (R-17), emit
``auto_retry_start`` (R-19), drop the error from the runtime context (R-20), sleep
(R-21), re-attempt (R-22): its first answer decides — a good one is the chain's
success, announced here before its tools run (R-23a); then the rest of the run, and
what ``decide`` made of its end.
Whatever way the scope is left — success, over the maximum, a non-retryable
result, cancellation from anywhere — one ``auto_retry_end`` is emitted on the
way out. Emission is synchronous, so it cannot be skipped by cancellation (R-34).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import NoReturn, Protocol

import attrs
import trio

from .._core.classes import define
from .._core.events import AutoRetryEnd, AutoRetryStart, SessionEvent
from .._core.messages import AssistantMessage, Message
from .classify import parse_retry_after_ms
from .decide import Next
from .policy import RetryPolicy

CANCELLED = "Retry cancelled"


class Attempt(Protocol):
    """An agent run as its driver steps it (``trio_session._agent.loop.AgentRun``)."""

    @property
    def produced(self) -> Sequence[Message]:
        """The messages the run added, in order."""
        ...

    async def next_message(self) -> AssistantMessage:
        """Open a turn; its answer, just after its ``message_end``."""
        ...

    async def turns(self) -> AssistantMessage:
        """Every step left but the end; the run's last answer."""
        ...

    def end(self, *, will_retry: bool) -> AssistantMessage:
        """``agent_end`` (R-45a); the last answer."""
        ...


class ChainHost(Protocol):
    """What a chain needs from the prompt that runs it (``run.py:PromptRun`` is the one
    host): declared here, below its implementer, so the chain imports nothing above it."""

    @property
    def policy(self) -> RetryPolicy:
        """The policy in effect now, resolved from the settings at each read (R-11)."""
        ...

    @property
    def emit(self) -> Callable[[SessionEvent], None]:
        """Deliver one event, synchronously (the session's hub, called directly)."""
        ...

    def chain_ended(self) -> None:
        """The chain's ``auto_retry_end`` is out (``wait_for_retry_end`` wakes)."""
        ...

    def drop_from_context(self, message: AssistantMessage) -> None:
        """Remove the failed attempt from the runtime context (R-20)."""
        ...

    async def rotate_credential(self, hint_ms: int | None) -> bool:
        """Report a usage limit (R-17); whether the store moved to another key."""
        ...

    async def share_cooldown(self, hint_ms: int) -> None:
        """Share a server's wait hint with every session on the key (R-28b)."""
        ...

    async def cooldown_delay(self, delay_ms: int) -> int:
        """``delay_ms``, or what is left of the key's shared cooldown if that is longer."""
        ...

    def reattempt(self, retried: AssistantMessage) -> AbstractContextManager[Attempt]:
        """The re-attempt's agent run (R-22), to enter; ``retried`` is the error (R-63)."""
        ...

    async def finish(self, attempt: Attempt) -> tuple[AssistantMessage, Next]:
        """Drive a run to its end; its last message and what ``decide`` made of it."""
        ...


@define(eq=False, on_setattr=attrs.setters.NO_OP)
class RetryChain:
    """One retry chain, from the first retryable error to its ``auto_retry_end``.

    Attributes:
        attempt: the current 1-based attempt; 0 before the first (R-9).
        ended: whether ``auto_retry_end`` has been emitted.
        retrying: the error the next (or running) re-attempt retries (R-63).
        gave_up: the retryable error the chain gave up on — over ``maxRetries`` (R-15),
            a wait refused (R-28) or past the budget (R-61) — where a fallback model
            may take over (R-65); ``None`` for any other end.
    """

    attempt: int = 0
    ended: bool = False
    retrying: AssistantMessage | None = None
    gave_up: AssistantMessage | None = None
    # the scope of the phase the chain is in, or enters next: abort_retry() cancels it
    _scope: trio.CancelScope = attrs.field(factory=trio.CancelScope, init=False)
    _aborted: bool = attrs.field(default=False, init=False)  # abort_retry() was called
    _sleeping: bool = attrs.field(default=False, init=False)  # in the wait's sleep
    _pending_delay_ms: int = attrs.field(default=0, init=False)
    _began: float = attrs.field(default=0.0, init=False)  # trio time of the first error
    _task: trio.lowlevel.Task | None = attrs.field(default=None, init=False)  # run()'s
    # the cancel a sleeping chain was woken with, raised in its own task (_abort_sleep)
    _raise_cancel: Callable[[], NoReturn] | None = attrs.field(default=None, init=False)

    @property
    def alive(self) -> bool:
        """True until the chain's end event is out."""
        return not self.ended

    @property
    def sleeping(self) -> bool:
        """True while the chain's task is in its backoff sleep (it may be woken already)."""
        return self._sleeping

    @property
    def waiting(self) -> bool:
        """True while the backoff delay still runs: the chain is neither cancelled nor
        past its sleep. Once the sleep was cut short (``skip_wait``) or its deadline
        passed, the re-attempt has begun — whether or not the chain's task has run
        since (it wakes on a later scheduler pass), so nothing depends on when it does."""
        return self._sleeping and not self._scope.cancel_called

    def cancel(self) -> None:
        """``abort_retry()``: cancel the sleep or the in-flight re-attempt (R-29, R-31)."""
        if self.alive:
            self._aborted = True
            self._scope.cancel(reason="retry aborted")

    def skip_wait(self) -> bool:
        """``retry_now()``: end the current backoff sleep early (R-34a); whether it did
        (not if the wait was already over: ``waiting`` is false)."""
        if not self.waiting:
            return False
        self._scope.cancel(reason="retry now")  # the wait ends; the chain goes on
        return True

    async def run(
        self, host: ChainHost, error: AssistantMessage, step: Next
    ) -> tuple[AssistantMessage, Next] | None:
        """Drive the chain from ``error`` (decided ``step``: retry or give up) until it ends.

        Args:
            host: the prompt running the chain.
            error: the retryable error that starts it.
            step: what ``decide`` made of ``error``: ``RETRY`` or ``GIVE_UP``.

        Returns:
            The message that ended the chain, and its step, when the session still
                has to act on it — after a success (it may need a fresh chain later,
                R-24) or a non-retryable result (R-25) — or ``None``.
        """
        message = error
        self._began = trio.current_time()  # retry.maxTotalMs counts from here
        self._task = trio.lowlevel.current_task()
        try:
            while True:
                with self._scope as wait:  # made with the chain, or as the last phase ended
                    event = await self._start_attempt(host, message, step)
                    if isinstance(event, AutoRetryEnd):  # over the maximum, budget or cap
                        self.gave_up = message
                        self._end(host, event)
                        return None
                    host.emit(event)
                    del event  # the backoff keeps this frame, not the event
                    host.drop_from_context(message)
                    self.retrying = message
                    # The sleep: the scope's deadline is the delay's end.
                    wait.deadline = trio.current_time() + self._pending_delay_ms / 1000
                    self._sleeping = True
                    await trio.lowlevel.wait_task_rescheduled(self._abort_sleep)
                    self._wake_cancelled()
                self._sleeping = False
                if self._aborted:
                    return None  # the finally says "Retry cancelled"
                with self._next_scope() as reattempt, host.reattempt(message) as attempt:
                    first = await attempt.next_message()  # the answer decides
                    if not first.failed:  # R-23, R-23a: before its tools and turn_end
                        self._end(host, AutoRetryEnd(success=True, attempt=self.attempt))
                    message, step = await host.finish(attempt)
                if reattempt.cancelled_caught:
                    return None  # abort_retry() cancelled it
                if self.ended:
                    return message, step  # a success: the session acts on what followed
                if not step.retries:
                    final = message.error_message or f"re-attempt ended: {message.stop_reason}"
                    self._end(host, AutoRetryEnd(False, self.attempt, final))
                    return message, step
                self._next_scope()  # the next wait's: cancelled already if aborted since
        except Exception as exc:  # the session file could not be written, or a bug
            self._end(host, AutoRetryEnd(False, self.attempt, str(exc) or repr(exc)))
            raise
        finally:
            self._sleeping = False
            self._task = None  # an ended chain, kept until the next prompt, holds no task
            if not self.ended:
                self._end(host, AutoRetryEnd(False, self.attempt, CANCELLED))

    def _abort_sleep(self, raise_cancel: Callable[[], NoReturn]) -> trio.lowlevel.Abort:
        """The backoff sleep's abort function: any cancel (the deadline's too) ends it.

        It wakes the chain and leaves the ``Cancelled`` to be raised in the chain's own
        task (``_wake_cancelled``), the way ``wait_task_rescheduled`` documents for a
        cancel reported late. Returning ``SUCCEEDED`` would have trio raise it here, in
        the canceller's call: its traceback would then keep the ``abort_retry()``
        caller's frames alive until the chain runs -- ten objects a session that the
        collector ages with every session cancelled at once (``cancel_all.abort_retry``).
        """
        self._raise_cancel = raise_cancel
        assert self._task is not None  # set by run() before any sleep
        trio.lowlevel.reschedule(self._task)
        return trio.lowlevel.Abort.FAILED

    def _wake_cancelled(self) -> NoReturn:
        """Raise, in the chain's task, the cancel that woke the sleep (only a cancel does)."""
        raise_cancel, self._raise_cancel = self._raise_cancel, None
        assert raise_cancel is not None
        raise_cancel()

    def _next_scope(self) -> trio.CancelScope:
        """The scope of the chain's next phase, made as the last one is left (no
        checkpoint in between, so ``abort_retry()`` always finds the scope to cancel).
        Born cancelled once the chain is aborted: a cancel sticks, as on one scope."""
        scope = self._scope = trio.CancelScope()
        if self._aborted:
            scope.cancel(reason="retry aborted")
        return scope

    async def _start_attempt(
        self, host: ChainHost, message: AssistantMessage, step: Next
    ) -> AutoRetryStart | AutoRetryEnd:
        """The next attempt's ``auto_retry_start`` (its delay planned), or the chain's
        ``auto_retry_end`` if it ends here instead."""
        policy = host.policy
        text = message.error_message or ""
        if step is Next.GIVE_UP:  # decide() found attempt + 1 > maxRetries
            return AutoRetryEnd(False, self.attempt, text)
        self.attempt += 1
        hint = parse_retry_after_ms(text)
        plan = policy.delay(self.attempt, hint_ms=hint)
        delay = plan.delay_ms
        if hint is not None:
            await host.share_cooldown(hint)  # retry.sharedCooldown: the fleet holds the key
        if policy.is_usage_limit(text) and await host.rotate_credential(hint):
            delay = 0
        if delay is None:
            return AutoRetryEnd(False, self.attempt, plan.refusal)
        delay = await host.cooldown_delay(delay)  # at least the key's shared cooldown
        spent = round((trio.current_time() - self._began) * 1000)
        refusal = policy.over_budget(spent, delay, text)
        if refusal is not None:  # not made: the last retry tried is reported (as R-27's)
            self.attempt -= 1
            return AutoRetryEnd(False, self.attempt, refusal)
        self._pending_delay_ms = delay
        return AutoRetryStart(self.attempt, policy.retry.max_retries, delay, text)

    def _end(self, host: ChainHost, event: AutoRetryEnd) -> None:
        if self.ended:
            return
        self.ended = True
        host.emit(event)
        host.chain_ended()
