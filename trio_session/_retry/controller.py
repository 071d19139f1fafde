"""The prompt's scope tree, and everything that acts on it: settle, join, abort, succeed.

One ``PromptController`` per session. ``run`` is one prompt, start to return, in the
scope tree ``trio_session._retry`` draws (its ``__init__``).

After every run ``decide`` says what follows (the verdict is the run's return value
here, never a field read later): nothing, a chain (``settle`` starts its task), or a
compaction then one continuation (R-50). ``saw_message`` announces a chain's success
right after the good message's ``message_end`` (R-23, R-23a).

What the controller needs from the session it declares in ``needs`` as Protocols
(``PromptJournal``, ``Recovery``, ``PromptWatcher``), which its collaborators implement:
nothing here imports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import attrs
import trio

from .._agent import Agent
from .._classes import define
from .._errors import SessionBusyError, SessionClosedError
from .._events import (
    AgentSettled,
    AutoRetryEnd,
    CompactionEnd,
    EntryAppended,
    ModelFallback,
    SessionEvent,
)
from .._groups import unwrapped
from .._messages import AssistantMessage, Message, UserMessage
from .chain import RetryChain
from .classify import Classifier, parse_retry_after_ms
from .decide import Next, SettingsSource
from .needs import Deliver, PromptJournal, PromptWatcher, Recovery
from .overflow import LENGTH_RECOVERY_FAILED, OVERFLOW_RECOVERY_FAILED
from .policy import RetryPolicy

if TYPE_CHECKING:  # made by the session only when it has fallbacks or a credential store
    from .fallback import Fallbacks
    from .keys import KeyRing

#: ``unwrapped`` keeps no state: one instance serves every prompt.
_UNWRAPPED = unwrapped()
#: The two ``agent_settled`` events; frozen, so every prompt shares them.
_SETTLED = AgentSettled(aborted=False)
_SETTLED_ABORTED = AgentSettled(aborted=True)


#: What ``prompt()`` says while another prompt (or a compaction) runs.
BUSY = (
    "the session is already processing a prompt; queue the message with steer() or "
    'follow_up() (over RPC: streamingBehavior "steer" or "followUp"), '
    "or await the prompt or abort() first"
)


@define(eq=False, weakref_slot=False)  # nothing refers to it weakly
class PromptController:
    """One session's prompts: the scope tree, the decision after each run, the chain.

    Attributes:
        agent: the agent loop the prompts run.
        settings: where the settings are read (R-11).
        hub: where events go.
        journal: the history, as a prompt needs it.
        recovery: the overflow compaction.
        watcher: the observer's prompt span.
        classifier: overrides ``retry.classifier``.
        keys: the session's credentials, if it has a store.
        fallbacks: the fallback models, if the session has any (R-65).
        running: a prompt (or a manual compaction) is in progress.
        closed: the session is closed: no prompt starts.
        chain: the prompt's retry chain, if one started.
    """

    agent: Agent
    settings: SettingsSource
    hub: Deliver
    journal: PromptJournal
    recovery: Recovery
    watcher: PromptWatcher
    classifier: Classifier | None = None
    keys: KeyRing | None = None
    fallbacks: Fallbacks | None = None
    running: bool = attrs.field(default=False, init=False)
    closed: bool = attrs.field(default=False, init=False)
    chain: RetryChain | None = attrs.field(default=None, init=False)
    _run_scope: trio.CancelScope | None = attrs.field(default=None, init=False)
    # the policy of the settings last read (a cache: ``policy`` makes a new one on change)
    _policy: RetryPolicy | None = attrs.field(default=None, init=False)
    _nursery: trio.Nursery | None = attrs.field(default=None, init=False)
    _verdict: Next = attrs.field(default=Next.DONE, init=False)
    _compacted: bool = attrs.field(default=False, init=False)
    # Prompts that joined a retry in its backoff; a list only once there is one.
    _joined: list[UserMessage] | None = attrs.field(default=None, init=False)
    # The steering messages the joined re-attempt's first turn takes (fixed at the join).
    _join_steering: tuple[UserMessage, ...] | None = attrs.field(default=None, init=False)
    # Who waits for the session to be idle (abort) or for a chain's end; made on first use.
    _idle: trio.lowlevel.ParkingLot | None = attrs.field(default=None, init=False)
    _retry_ended: trio.lowlevel.ParkingLot | None = attrs.field(default=None, init=False)
    # pi-1.6 (R-53b): a usage-limit error and the store's answer, asked before deciding.
    _told: tuple[AssistantMessage, bool] | None = attrs.field(default=None, init=False)
    # abort() came (or the run was cancelled) during this prompt: its agent_settled says so
    _aborted: bool = attrs.field(default=False, init=False)
    # Why the next ``Next.FALLBACK`` falls back, set where it is decided.
    _fallback_reason: Literal["retries_exhausted", "no_key_left"] = attrs.field(
        default="retries_exhausted", init=False
    )

    # -- state ---------------------------------------------------------------------

    @property
    def live_chain(self) -> RetryChain | None:
        """The chain, while it has not ended (R-10)."""
        chain = self.chain
        return chain if chain is not None and chain.alive else None

    @property
    def joined(self) -> Sequence[UserMessage] | None:
        """Prompts that joined the waiting retry; ``None`` until there is one."""
        return self._joined

    @property
    def policy(self) -> RetryPolicy:
        """The policy in effect now (R-11: the settings as they are at each decision;
        R-53). Resolved again whenever the settings change, else the one made last."""
        settings = self.settings.current
        policy = self._policy
        if policy is None or policy.settings is not settings:
            policy = self._policy = RetryPolicy.resolve(settings, self.classifier)
        return policy

    # -- a prompt ------------------------------------------------------------------

    def refuse_closed(self) -> None:
        """Raise ``SessionClosedError`` once the session is closed."""
        if self.closed:
            msg = "the session is closed"
            raise SessionClosedError(msg)

    def refuse(self) -> None:
        """Raise what ``prompt()`` raises before it starts: closed, or busy (R-36)."""
        if self.closed or self.running:
            self.refuse_closed()
            raise SessionBusyError(BUSY)

    def start(self) -> None:
        """The session runs a prompt or a manual compaction until ``end()``.

        Used as ``start(); try: … finally: await end()`` — a plain ``try`` rather than an
        async context manager, which costs a generator per prompt.
        """
        self.running = True
        self._aborted = False

    async def run(
        self, user: UserMessage, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """One prompt, in the scope tree above: stage it, run it, settle what follows.

        Args:
            user: the prompt's message.
            task_status: told once the prompt is on disk, before the run's first event.
        """
        # The prompt's span, entered and left by hand as ``with`` would, keeping no
        # bound method meanwhile (a no-op without OpenTelemetry).
        span = self.watcher.prompt()
        span.__enter__()
        try:
            with trio.CancelScope() as scope:  # the run, until a nursery takes over
                self._run_scope = scope
                if self.journal.file is not None:
                    await self.journal.stage_prompt(user)
                task_status.started()
                last = await self.agent.prompt(user, will_continue=self._decide)
            step = self._take_verdict()
            if scope.cancelled_caught:
                self._aborted = True
                self.watcher.prompt_aborted()
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
                        run = self._run_scope = nursery.cancel_scope
                        if aborted:
                            run.cancel(reason="session aborted")
                        await self._settle(last, step)
                except BaseExceptionGroup as group:
                    _UNWRAPPED.__exit__(type(group), group, group.__traceback__)
                    raise
                if run.cancelled_caught:
                    self._aborted = True
                    self.watcher.prompt_aborted()
        except BaseException as exc:
            if isinstance(exc, trio.Cancelled) or (  # cancelled by the prompt's caller
                isinstance(exc, BaseExceptionGroup) and exc.subgroup(trio.Cancelled)
            ):
                self._aborted = True
            if not span.__exit__(type(exc), exc, exc.__traceback__):
                raise
        else:
            span.__exit__(None, None, None)

    def open_scope(self) -> trio.CancelScope:
        """The scope of a manual compaction: ``abort()`` cancels it."""
        self._run_scope = trio.CancelScope()
        return self._run_scope

    async def end(self, *, settle: bool = False) -> None:
        """However the prompt ended: what waited joins the context (bash results, then
        prompts that joined a retry cancelled first go back to the steering queue), what
        is staged is written (shielded: an abort must not stop it), and the session is
        idle again: leaving the scope is the reset.

        Args:
            settle: a prompt ends (not a manual compaction): last, with the session idle,
                its one ``agent_settled`` (R-54), saying whether it was aborted.
        """
        try:
            self.journal.flush_pending()
            self._join_steering = None  # what it named is still queued
            if self._joined:  # joined a retry that was cancelled first: keep them queued
                self.agent.steering.messages[:0] = self._joined
                self._joined = None
                self.hub.emit(self.agent.queue_update())
            if self.journal.file is not None:
                with trio.CancelScope(shield=True):
                    await self.journal.flush_at_end()
        finally:
            self.running = False
            self._run_scope = None
            self._nursery = None
            self.chain = None
            self._verdict, self._compacted, self._told = Next.DONE, False, None
            if self.fallbacks is not None:
                self.fallbacks.restore(self.agent)  # the next prompt starts on ours
            if self._idle is not None:
                self._idle.unpark_all()
            if settle:
                self.hub.emit(_SETTLED_ABORTED if self._aborted else _SETTLED)

    # -- after a run (SPEC §1) -------------------------------------------------------

    def _decide(self, message: AssistantMessage) -> bool:
        """The agent's ``will_continue``: decide (R-1, R-2) just before ``agent_end``."""
        chain = self.live_chain
        policy = self.policy
        model = self.agent.model
        window = model.context_window
        attempt = chain.attempt if chain is not None else 0
        told = self._told
        rotated = told[1] if told is not None and told[0] is message else None
        if rotated is None and self.keys is None and message.stop_reason == "error":
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
            can_compact=lambda: self.recovery.can_compact(without_last=True),
        )
        fallbacks = self.fallbacks
        if fallbacks is not None and fallbacks.left(self.agent):
            if step is Next.DONE and rotated is False:  # pi-1.6: no free key (R-53b)
                self._fallback_reason = "no_key_left"
                step = Next.FALLBACK
            elif step is Next.GIVE_UP:  # the chain ends, then the fallback continues
                self._verdict = step
                return True
        self._verdict = step
        return step.will_retry

    async def ask_store(self, message: AssistantMessage) -> None:
        """The agent's ``on_failure``: under ``"pi-1.6"``, report a usage limit that may
        be retried to the credential store before the decision, so that ``agent_end``
        already knows whether a free key takes the re-attempt (R-53b, R-45a, R-56).

        The store is told what the chain tells it under ``"seed"``, in the same order:
        the server's wait hint for the fleet (R-28b), then the usage limit (R-17).

        Args:
            message: the run's last message, which failed.
        """
        self._told = None
        chain = self.live_chain
        asked = self.keys is not None and self.policy.asks_for_a_key(
            message,
            context_window=self.agent.model.context_window,
            attempt=chain.attempt if chain is not None else 0,
        )
        if not asked:
            return
        assert self.keys is not None
        hint = parse_retry_after_ms(message.error_message or "")
        if hint is not None:
            await self.keys.share_cooldown(hint)
        self._told = (message, await self.keys.rotate(hint))

    def _take_verdict(self) -> Next:
        """The decision of the run that just returned (read once, right after it)."""
        step, self._verdict = self._verdict, Next.DONE
        return step

    async def _settle(self, message: AssistantMessage, step: Next) -> None:
        """Act on the decision: start a retry chain, compact, or nothing."""
        while True:
            if step.retries:
                assert self._nursery is not None
                chain = self.chain = RetryChain()
                self._nursery.start_soon(self._run_chain, chain, message, step)
                return
            if step in (Next.COMPACT, Next.COMPACT_ONLY, Next.DROP):
                message, step = await self._compact(message, step)
                continue
            if step is Next.FALLBACK:
                message, step = await self._fall_back(message)
                continue
            if step is Next.OVERFLOW_FAILED:  # R-56c: pi 1.6.0 says so; the failure stays
                failed = (
                    LENGTH_RECOVERY_FAILED
                    if message.stop_reason == "length"
                    else OVERFLOW_RECOVERY_FAILED
                )
                self.hub.emit(CompactionEnd("overflow", None, False, False, failed))
            return

    async def _run_chain(self, chain: RetryChain, error: AssistantMessage, step: Next) -> None:
        try:
            leftover = await chain.run(self, error, step)
        finally:
            self.agent.retried = None  # only a re-attempt's replies name it
        if leftover is not None:
            await self._settle(*leftover)
        elif chain.gave_up is not None and self.fallbacks and self.fallbacks.left(self.agent):
            self._fallback_reason = "retries_exhausted"  # the chain gave up
            await self._settle(chain.gave_up, Next.FALLBACK)

    async def _fall_back(self, message: AssistantMessage) -> tuple[AssistantMessage, Next]:
        """R-65: say so, drop the failure from the context, move to the next fallback
        model and continue there, as a fresh run: a failure of it starts a new chain
        at attempt 1. In the prompt's nursery, so ``abort()`` cancels it (R-67)."""
        assert self.fallbacks is not None
        was, model = self.fallbacks.switch(self.agent)
        text = message.error_message or f"ended: {message.stop_reason}"
        reason, self._fallback_reason = self._fallback_reason, "retries_exhausted"
        self.hub.emit(ModelFallback(was, model, reason, text))
        self.drop_from_context(message)
        last = await self.agent.continue_(will_continue=self._decide)
        return last, self._take_verdict()

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
        result = await self.recovery.compact("overflow", will_retry=resume)
        if result is None or not resume:
            return message, Next.DONE
        last = await self.agent.continue_(will_continue=self._decide)
        return last, self._take_verdict()

    def saw_message(self, message: Message) -> None:
        """A ``message_end``: a good assistant message ends a chain in success, right
        there, before its ``turn_end`` (R-23, R-23a).

        Args:
            message: the message just ended.
        """
        if isinstance(message, AssistantMessage) and not message.failed:
            if message.stop_reason != "length":  # a length cut is what R-56b recovers
                self._compacted = False
            chain = self.live_chain
            if chain is not None and chain.attempt > 0:
                self.agent.retried = None
                chain.succeed(self)

    # -- what a chain needs (``ChainHost``) -----------------------------------------

    def emit(self, event: SessionEvent) -> None:
        """Deliver a chain's event; an end wakes ``wait_for_retry_end``.

        Args:
            event: ``auto_retry_start`` or ``auto_retry_end``.
        """
        self.hub.emit(event)
        if self._retry_ended is not None and isinstance(event, AutoRetryEnd):
            self._retry_ended.unpark_all()

    def drop_from_context(self, message: AssistantMessage) -> None:
        """Remove ``message`` from the end of the runtime context (R-20); history keeps it.

        Under ``retry.profile`` ``"pi-1.6"`` the session file says so too: a
        ``context_edit`` entry leaves it out of the context a resume (ours or pi
        1.6.0's) rebuilds, announced by ``entry_appended`` (R-56e).

        Args:
            message: the failed attempt.
        """
        if self.agent.messages and self.agent.messages[-1] is message:
            self.agent.messages.pop()
            if self.journal.file is not None and self.policy.pi16:
                entry = self.journal.omit(message)
                if entry is not None:
                    self.hub.emit(EntryAppended(entry))

    async def rotate_credential(self, hint_ms: int | None) -> bool:
        """R-17 through the key ring; False without a credential store.

        Args:
            hint_ms: the server's wait hint, if any.
        """
        told, self._told = self._told, None
        if told is not None:  # pi-1.6: asked before the decision (R-53b), not again
            return told[1]
        return self.keys is not None and await self.keys.rotate(hint_ms)

    async def share_cooldown(self, hint_ms: int) -> None:
        """R-28b through the key ring.

        Args:
            hint_ms: the server's wait hint.
        """
        if self.keys is not None and self._told is None:  # pi-1.6 shared it already
            await self.keys.share_cooldown(hint_ms)

    async def cooldown_delay(self, delay_ms: int) -> int:
        """``delay_ms``, or the key's shared cooldown if longer.

        Args:
            delay_ms: the planned delay.
        """
        return delay_ms if self.keys is None else max(delay_ms, await self.keys.cooldown_ms())

    async def reattempt(self) -> tuple[AssistantMessage, Next]:
        """Continue the agent on the context as it is (R-22), with any prompts that
        joined the retry during its backoff and the steering their run took then."""
        joined, self._joined = self._joined, None
        steering, self._join_steering = self._join_steering, None
        self.agent.retried = self.chain.retrying if self.chain is not None else None
        last = await self.agent.continue_(
            will_continue=self._decide, messages=joined or (), steering=steering if joined else None
        )
        return last, self._take_verdict()

    async def api_key(self) -> str | None:
        """The agent's key source: a fresh request waits out a shared cooldown."""
        assert self.keys is not None
        return await self.keys.api_key(fresh=self.live_chain is None)

    # -- control from outside -----------------------------------------------------------

    def join(self, user: UserMessage) -> bool:
        """Send ``user`` with the retry waiting out its backoff; False if none waits.

        Args:
            user: the new prompt.
        """
        chain = self.live_chain
        if chain is None or not chain.waiting:
            return False
        if self._joined is None:
            self._joined = []
        self._joined.append(user)
        self._join_steering = self.agent.steering.peek()  # the run's first look, now
        chain.skip_wait()
        return True

    def retry_now(self) -> bool:
        """Skip the rest of the backoff sleep (R-34a); whether one was cut short."""
        chain = self.live_chain
        return chain is not None and chain.skip_wait()

    def abort_retry(self) -> None:
        """Cancel the retry chain, if one is alive (R-29)."""
        if self.chain is not None:
            self.chain.cancel()

    async def wait_for_retry_end(self) -> None:
        """Return once no retry chain is alive."""
        while self.live_chain is not None:
            if self._retry_ended is None:
                self._retry_ended = trio.lowlevel.ParkingLot()
            await self._retry_ended.park()

    async def abort(self) -> None:
        """Cancel any retry, then the running prompt; return when it is over (R-32)."""
        if self.running:
            self._aborted = True  # the prompt's agent_settled says so
        chain = self.chain
        if chain is not None and chain.sleeping:
            # In its backoff sleep the chain is all that runs of the prompt (whose body
            # waits for its nursery): ending the chain ends the prompt. One cancel, and
            # no Cancelled travels through the nursery as an exception group.
            self.watcher.prompt_aborted()
            chain.cancel()
        else:
            self.abort_retry()
            if self._run_scope is not None:
                self._run_scope.cancel(reason="session aborted")
        if not self.running:
            await trio.lowlevel.checkpoint()
            return
        # Wait for the end of the prompt cancelled here, not for "not running": a new
        # prompt started by another task before this one resumes is not waited for.
        if self._idle is None:
            self._idle = trio.lowlevel.ParkingLot()
        await self._idle.park()
