"""The session's prompts: which one runs, and everything that acts on it from outside.

One ``PromptController`` per session. A prompt is a ``run.py:PromptRun``, made by
``begin`` and gone at ``end``; the controller holds it as ``current`` so that
``abort``, ``join``, ``retry_now`` and ``abort_retry`` reach its chain and scopes.

What the controller needs from the session it declares in ``needs`` as Protocols
(``PromptJournal``, ``Recovery``, ``PromptWatcher``), which its collaborators implement:
nothing here imports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs
import trio

from .._agent.loop import Agent
from .._core.classes import define
from .._core.errors import SessionBusyError, SessionClosedError
from .._core.events import AgentSettled
from .._core.messages import UserMessage
from .chain import RetryChain
from .classify import Classifier
from .decide import SettingsSource
from .needs import Deliver, PromptJournal, PromptWatcher, Recovery
from .policy import RetryPolicy
from .run import PromptRun

if TYPE_CHECKING:  # made by the session only when it has fallbacks or a credential store
    from .fallback import Fallbacks
    from .keys import KeyRing

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
    """One session's prompts: the one in progress, and control over it from outside.

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
        current: the prompt in progress, if any.
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
    current: PromptRun | None = attrs.field(default=None, init=False)
    # a manual compaction's scope (``open_scope``): abort() cancels it
    _run_scope: trio.CancelScope | None = attrs.field(default=None, init=False)
    # the policy of the settings last read (a cache: ``policy`` makes a new one on change)
    _policy: RetryPolicy | None = attrs.field(default=None, init=False)
    # Who waits for the session to be idle (abort) or for a chain's end; made on first use.
    _idle: trio.lowlevel.ParkingLot | None = attrs.field(default=None, init=False)
    _retry_ended: trio.lowlevel.ParkingLot | None = attrs.field(default=None, init=False)

    # -- state ---------------------------------------------------------------------

    @property
    def chain(self) -> RetryChain | None:
        """The running prompt's retry chain, if one started."""
        current = self.current
        return current.chain if current is not None else None

    @property
    def live_chain(self) -> RetryChain | None:
        """The chain, while it has not ended (R-10)."""
        chain = self.chain
        return chain if chain is not None and chain.alive else None

    @property
    def joined(self) -> Sequence[UserMessage] | None:
        """Prompts that joined the waiting retry; ``None`` until there is one."""
        current = self.current
        return current.joined if current is not None else None

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
        self.journal.begin()

    def begin(self) -> PromptRun:
        """The prompt that starts now (after ``start``): its ``run`` is the prompt."""
        current = self.current = PromptRun(self)
        return current

    def open_scope(self) -> trio.CancelScope:
        """The scope of a manual compaction: ``abort()`` cancels it."""
        self._run_scope = trio.CancelScope()
        return self._run_scope

    def retry_ended(self) -> None:
        """A chain's ``auto_retry_end`` is out: wake ``wait_for_retry_end``."""
        if self._retry_ended is not None:
            self._retry_ended.unpark_all()

    async def end(self, *, settle: bool = False) -> None:
        """However the prompt ended: what waited joins the context (bash results, then
        prompts that joined a retry cancelled first go back to the steering queue), what
        is staged is written (shielded: an abort must not stop it), and the session is
        idle again: leaving the scope is the reset.

        Args:
            settle: a prompt ends (not a manual compaction): last, with the session idle,
                its one ``agent_settled`` (R-54), saying whether it was aborted.
        """
        current = self.current
        try:
            self.journal.flush_pending()
            if current is not None:
                current.join_steering = None  # what it named is still queued
                if current.joined:  # joined a retry cancelled first: keep them queued
                    self.agent.steering.messages[:0] = current.joined
                    current.joined = None
                    self.hub.emit(self.agent.queue_update())
            if self.journal.file is not None:
                with trio.CancelScope(shield=True):
                    await self.journal.flush_at_end()
        finally:
            self.running = False
            self._run_scope = None
            self.current = None
            if self.fallbacks is not None:
                self.fallbacks.restore(self.agent)  # the next prompt starts on ours
            if self._idle is not None:
                self._idle.unpark_all()
            if settle:
                aborted = current is not None and current.aborted
                self.hub.emit(_SETTLED_ABORTED if aborted else _SETTLED)

    # -- control from outside -----------------------------------------------------------

    def join(self, user: UserMessage) -> bool:
        """Send ``user`` with the retry waiting out its backoff; False if none waits.

        Args:
            user: the new prompt.
        """
        chain = self.live_chain
        current = self.current
        if chain is None or not chain.waiting or current is None:
            return False
        if current.joined is None:
            current.joined = []
        current.joined.append(user)
        current.join_steering = self.agent.steering.peek()  # the run's first look, now
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
        current = self.current
        if current is not None:
            current.aborted = True  # the prompt's agent_settled says so
        chain = self.chain
        if chain is not None and chain.sleeping:
            # In its backoff sleep the chain is all that runs of the prompt (whose body
            # waits for its nursery): ending the chain ends the prompt. One cancel, and
            # no Cancelled travels through the nursery as an exception group.
            self.watcher.prompt_aborted()
            chain.cancel()
        else:
            self.abort_retry()
            scope = current.scope if current is not None else self._run_scope
            if scope is not None:
                scope.cancel(reason="session aborted")
        if not self.running:
            await trio.lowlevel.checkpoint()
            return
        # Wait for the end of the prompt cancelled here, not for "not running": a new
        # prompt started by another task before this one resumes is not waited for.
        if self._idle is None:
            self._idle = trio.lowlevel.ParkingLot()
        await self._idle.park()
