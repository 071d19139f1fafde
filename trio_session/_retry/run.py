"""One prompt, as one loop: ``PromptRun``, made by ``prompt()`` and gone when it returns.

``run`` reads top to bottom: the first attempt, then what ``policy.decide`` made of
its last answer — retry (a chain task in the prompt's nursery), compact, fall back or
done — each a returned value. The agent's run is driven here turn by turn
(``Agent.start_run``), so the decision is made by this loop and ``willRetry`` handed
to the run's ``end``: nothing calls back up from the agent.

The prompt's state lives here, for the prompt only: its chain, its scopes, what
joined its backoff, whether it compacted, the credential store's answer (R-53b).
The session-long ``PromptController`` holds the prompt in progress (``current``) to
act on it from outside (``abort``, ``join``, ``retry_now``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, Protocol

import attrs
import trio

from .._agent.loop import Agent, AgentRun
from .._core.classes import define
from .._core.events import CompactionEnd, EntryAppended, ModelFallback, SessionEvent
from .._core.groups import unwrapped
from .._core.messages import AssistantMessage, UserMessage
from .chain import Attempt, RetryChain
from .classify import parse_retry_after_ms
from .decide import Next
from .needs import Deliver, PromptJournal, PromptWatcher, Recovery
from .overflow import LENGTH_RECOVERY_FAILED, OVERFLOW_RECOVERY_FAILED
from .policy import RetryPolicy

if TYPE_CHECKING:  # made by the session only when it has fallbacks or a credential store
    from .fallback import Fallbacks
    from .keys import KeyRing

#: ``unwrapped`` keeps no state: one instance serves every prompt.
_UNWRAPPED = unwrapped()


class PromptHost(Protocol):
    """What a prompt needs of the session, for the session's life (``PromptController``
    is the one host): declared here, so this module imports nothing above it."""

    @property
    def agent(self) -> Agent:
        """The agent loop the prompt drives."""
        ...

    @property
    def policy(self) -> RetryPolicy:
        """The policy in effect now, resolved from the settings at each read (R-11)."""
        ...

    @property
    def hub(self) -> Deliver:
        """Where events go."""
        ...

    @property
    def journal(self) -> PromptJournal:
        """The history."""
        ...

    @property
    def recovery(self) -> Recovery:
        """The overflow compaction."""
        ...

    @property
    def watcher(self) -> PromptWatcher:
        """The prompt's span."""
        ...

    @property
    def keys(self) -> KeyRing | None:
        """The session's credentials, if it has a store."""
        ...

    @property
    def fallbacks(self) -> Fallbacks | None:
        """The fallback models, if the session has any (R-65)."""
        ...

    def retry_ended(self) -> None:
        """A chain's ``auto_retry_end`` is out: wake whoever waits for it."""
        ...


@define(eq=False, weakref_slot=False)  # nothing refers to it weakly
class PromptRun:
    """One prompt, start to return: the scope tree ``trio_session._retry`` draws.

    Attributes:
        control: the session's prompts (the agent, the settings, the hub, the keys).
        chain: the prompt's retry chain, if one started.
        scope: the run's cancel scope (``abort()`` cancels it).
        joined: prompts that joined the retry in its backoff; ``None`` until one does.
        join_steering: the steering messages the joined re-attempt's first turn takes.
        aborted: ``abort()`` came, or the run was cancelled: ``agent_settled`` says so.
    """

    control: PromptHost
    chain: RetryChain | None = attrs.field(default=None, init=False)
    scope: trio.CancelScope | None = attrs.field(default=None, init=False)
    joined: list[UserMessage] | None = attrs.field(default=None, init=False)
    join_steering: tuple[UserMessage, ...] | None = attrs.field(default=None, init=False)
    aborted: bool = attrs.field(default=False, init=False)
    _nursery: trio.Nursery | None = attrs.field(default=None, init=False)
    # this prompt compacted after an overflow, and no good answer came since (R-56c)
    _compacted: bool = attrs.field(default=False, init=False)
    # pi-1.6 (R-53b): a usage-limit error and the store's answer, asked before deciding;
    # the chain that starts on it uses that answer rather than asking again
    _told: tuple[AssistantMessage, bool] | None = attrs.field(default=None, init=False)

    @property
    def live_chain(self) -> RetryChain | None:
        """The chain, while it has not ended (R-10)."""
        chain = self.chain
        return chain if chain is not None and not chain.ended else None

    @property
    def policy(self) -> RetryPolicy:
        """The policy in effect now (R-11)."""
        return self.control.policy

    @property
    def emit(self) -> Callable[[SessionEvent], None]:
        """The session's ``EventHub.emit``: a chain's events go straight there."""
        return self.control.hub.emit

    # -- the loop ------------------------------------------------------------------

    async def run(
        self, user: UserMessage, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """The prompt: stage it, run it, act on what ``decide`` says.

        Args:
            user: the prompt's message.
            task_status: told once the prompt is on disk, before the run's first event.
        """
        control = self.control
        # The prompt's span, entered and left by hand as ``with`` would, keeping no
        # bound method meanwhile (a no-op without OpenTelemetry).
        span = control.watcher.prompt()
        span.__enter__()
        try:
            with trio.CancelScope() as scope:  # the run, until a nursery takes over
                self.scope = scope
                if control.journal.file is not None:
                    await control.journal.stage_prompt(user)
                task_status.started()
                with control.agent.start_run((user,)) as attempt:
                    last, step = await self.finish(attempt)
                del attempt  # a chain's backoff keeps this frame: not the run it ended
            if scope.cancelled_caught:
                self._was_aborted()
            elif step is not Next.DONE:
                # A chain or a compaction follows: they run in the prompt's nursery,
                # opened only now, so a turn that succeeds first time pays for none (nor
                # for unwrapping: only a nursery makes exception groups). Its scope is the
                # run's from here on, born cancelled if abort() came as the first run
                # ended; the first scope is let go.
                aborted = scope.cancel_called
                del scope
                try:  # as ``with _UNWRAPPED:``, without a bound method kept meanwhile
                    async with trio.open_nursery() as nursery:
                        self._nursery = nursery
                        run = self.scope = nursery.cancel_scope
                        if aborted:
                            run.cancel(reason="session aborted")
                        await self.settle(last, step)
                except BaseExceptionGroup as group:
                    _UNWRAPPED.__exit__(type(group), group, group.__traceback__)
                    raise
                if run.cancelled_caught:
                    self._was_aborted()
        except BaseException as exc:
            if isinstance(exc, trio.Cancelled) or (  # cancelled by the prompt's caller
                isinstance(exc, BaseExceptionGroup) and exc.subgroup(trio.Cancelled)
            ):
                self.aborted = True
            if not span.__exit__(type(exc), exc, exc.__traceback__):
                raise
        else:
            span.__exit__(None, None, None)

    def _was_aborted(self) -> None:
        self.aborted = True
        self.control.watcher.prompt_aborted()

    async def finish(self, attempt: Attempt) -> tuple[AssistantMessage, Next]:
        """Drive the agent's run to its last answer, decide (R-1, R-2) and end it with
        ``willRetry`` (R-45a); the last answer and the decision.

        Args:
            attempt: the agent's run, entered (``agent_start`` is out).
        """
        last = await attempt.turns()
        for message in attempt.produced:  # a good answer ends "compacted" (R-56c),
            if (  # but a length cut is what R-56b recovers
                isinstance(message, AssistantMessage)
                and not message.failed
                and message.stop_reason != "length"
            ):
                self._compacted = False
        rotated = await self.ask_store(last) if last.failed else None
        step, will_retry = self.decide(last, rotated)
        attempt.end(will_retry=will_retry)
        return last, step

    def decide(self, message: AssistantMessage, rotated: bool | None) -> tuple[Next, bool]:
        """What follows a run ending in ``message`` (R-1, R-2), and its ``willRetry``.

        Args:
            message: the run's last answer.
            rotated: the credential store's answer, when ``ask_store`` asked it.
        """
        control = self.control
        chain = self.live_chain
        policy = control.policy
        model = control.agent.model
        window = model.context_window
        attempt = chain.attempt if chain is not None else 0
        if rotated is None and control.keys is None and message.stop_reason == "error":
            # R-53b: no credential store, no free key (``ask_store`` asks when there is one)
            asked = policy.asks_for_a_key(message, context_window=window, attempt=attempt)
            rotated = False if asked else None
        step = policy.decide(
            message,
            context_window=window,
            max_tokens=model.max_tokens,
            attempt=attempt,
            compacted=self._compacted,
            rotated=rotated,
            can_compact=lambda: control.recovery.can_compact(without_last=True),
        )
        fallbacks = control.fallbacks
        if fallbacks is not None and fallbacks.left(control.agent):
            if step is Next.DONE and rotated is False:  # pi-1.6: no free key (R-53b)
                return Next.FALLBACK, True
            if step is Next.GIVE_UP:  # the chain ends, then the fallback continues
                return step, True
        return step, step.will_retry

    async def ask_store(self, message: AssistantMessage) -> bool | None:
        """Under ``"pi-1.6"``, report a usage limit that may be retried to the credential
        store before the decision, so that ``agent_end`` already knows whether a free
        key takes the re-attempt (R-53b, R-45a, R-56); its answer, or ``None``.

        The store is told what the chain tells it under ``"seed"``, in the same order:
        the server's wait hint for the fleet (R-28b), then the usage limit (R-17).

        Args:
            message: the run's last message, which failed.
        """
        self._told = None
        control = self.control
        chain = self.live_chain
        keys = control.keys
        asked = keys is not None and control.policy.asks_for_a_key(
            message,
            context_window=control.agent.model.context_window,
            attempt=chain.attempt if chain is not None else 0,
        )
        if not asked:
            return None
        assert keys is not None
        hint = parse_retry_after_ms(message.error_message or "")
        base_url = control.agent.model.base_url
        if hint is not None:
            await keys.share_cooldown(hint, base_url)
        rotated = await keys.rotate(hint, base_url)
        self._told = (message, rotated)
        return rotated

    async def settle(self, message: AssistantMessage, step: Next) -> None:
        """Act on the decision: start a retry chain, compact, fall back, or nothing."""
        reason: Literal["retries_exhausted", "no_key_left"] = "no_key_left"
        while True:
            if step.retries:
                assert self._nursery is not None
                chain = self.chain = RetryChain()
                self._nursery.start_soon(self.run_chain, chain, message, step)
                return
            if step in (Next.COMPACT, Next.COMPACT_ONLY, Next.DROP):
                message, step = await self._compact(message, step)
            elif step is Next.FALLBACK:  # a decision's FALLBACK is "no key left"
                message, step = await self._fall_back(message, reason)
            else:
                if step is Next.OVERFLOW_FAILED:  # R-56c: pi 1.6.0 says so; it stays
                    failed = (
                        LENGTH_RECOVERY_FAILED
                        if message.stop_reason == "length"
                        else OVERFLOW_RECOVERY_FAILED
                    )
                    self.emit(CompactionEnd("overflow", None, False, False, failed))
                return

    async def run_chain(self, chain: RetryChain, error: AssistantMessage, step: Next) -> None:
        """The chain's task: the chain, then what its end leaves to do (R-24, R-25, R-65)."""
        leftover = await chain.run(self, error, step)
        if leftover is not None:
            await self.settle(*leftover)
        elif chain.gave_up is not None and self.control.fallbacks:
            fallbacks = self.control.fallbacks
            if fallbacks.left(self.control.agent):  # the chain gave up
                message, next_step = await self._fall_back(chain.gave_up, "retries_exhausted")
                await self.settle(message, next_step)

    async def _fall_back(
        self, message: AssistantMessage, reason: Literal["retries_exhausted", "no_key_left"]
    ) -> tuple[AssistantMessage, Next]:
        """R-65: say so, drop the failure from the context, move to the next fallback
        model and continue there, as a fresh run: a failure of it starts a new chain
        at attempt 1. In the prompt's nursery, so ``abort()`` cancels it (R-67)."""
        control = self.control
        assert control.fallbacks is not None
        was, model = control.fallbacks.switch(control.agent)
        text = message.error_message or f"ended: {message.stop_reason}"
        self.emit(ModelFallback(was, model, reason, text))
        self.drop_from_context(message)
        with control.agent.start_run() as attempt:
            return await self.finish(attempt)

    async def _compact(
        self, message: AssistantMessage, step: Next
    ) -> tuple[AssistantMessage, Next]:
        """The overflow path (R-50, R-56): drop the failure, compact, continue once.

        ``COMPACT_ONLY`` keeps the answer and does not continue; ``DROP`` (nothing to
        compact) drops the failure and does not continue either: under ``"seed"`` the
        compaction events still say so, as pi 0.73.1's; under ``"pi-1.6"`` there are none.
        """
        resume = step is Next.COMPACT
        if step is not Next.COMPACT_ONLY:
            self.drop_from_context(message)
            self._compacted = True
        result = await self.control.recovery.compact("overflow", will_retry=resume)
        if result is None or not resume:
            return message, Next.DONE
        with self.control.agent.start_run() as attempt:
            return await self.finish(attempt)

    # -- what a chain needs (``ChainHost``) -----------------------------------------

    def chain_ended(self) -> None:
        """A chain's ``auto_retry_end`` is out: wake ``wait_for_retry_end``."""
        self.control.retry_ended()

    def drop_from_context(self, message: AssistantMessage) -> None:
        """Remove ``message`` from the end of the runtime context (R-20); history keeps it.

        Under ``retry.profile`` ``"pi-1.6"`` the session file says so too: a
        ``context_edit`` entry leaves it out of the context a resume (ours or pi
        1.6.0's) rebuilds, announced by ``entry_appended`` (R-56e).

        Args:
            message: the failed attempt.
        """
        control = self.control
        messages = control.agent.messages
        if messages and messages[-1] is message:
            messages.pop()
            if control.journal.file is not None and control.policy.pi16:
                entry = control.journal.omit(message)
                if entry is not None:
                    self.emit(EntryAppended(entry))

    async def rotate_credential(self, hint_ms: int | None) -> bool:
        """R-17 through the key ring; False without a credential store.

        Args:
            hint_ms: the server's wait hint, if any.
        """
        told, self._told = self._told, None
        if told is not None:  # pi-1.6: asked before the decision (R-53b), not again
            return told[1]
        keys = self.control.keys
        return keys is not None and await keys.rotate(hint_ms, self.control.agent.model.base_url)

    async def share_cooldown(self, hint_ms: int) -> None:
        """R-28b through the key ring.

        Args:
            hint_ms: the server's wait hint.
        """
        keys = self.control.keys
        if keys is not None and self._told is None:  # pi-1.6 shared it already
            await keys.share_cooldown(hint_ms, self.control.agent.model.base_url)

    async def cooldown_delay(self, delay_ms: int) -> int:
        """``delay_ms``, or the key's shared cooldown if longer.

        Args:
            delay_ms: the planned delay.
        """
        keys = self.control.keys
        if keys is None:
            return delay_ms
        return max(delay_ms, await keys.cooldown_ms(self.control.agent.model.base_url))

    def reattempt(self, retried: AssistantMessage) -> AgentRun:
        """The re-attempt's agent run (R-22), to enter: on the context as it is, with any
        prompts that joined the retry during its backoff and the steering their run
        took then; its first answer names ``retried`` if it fails (R-63).

        Args:
            retried: the error the re-attempt retries.
        """
        joined, self.joined = self.joined, None
        steering, self.join_steering = self.join_steering, None
        return self.control.agent.start_run(
            joined or (),
            steering=steering if joined else None,
            unsaved=bool(joined),
            retried=retried,
        )
