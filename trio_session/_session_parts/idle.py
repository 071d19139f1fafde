"""``assert_idle``: whether a session has anything still running, said by name.

A service with many sessions (or a test) checks that a session it is done with is
quiet: no prompt, no retry chain, no compaction, no bash command, no request to the
provider in flight. Each is read from the collaborator that owns it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._agent import Agent
    from .._bash import BashRun
    from .._retry.controller import PromptController
    from .compaction import Compaction


class IdlePart:
    """``AgentSession``'s ``assert_idle`` (a base class of the facade)."""

    if not TYPE_CHECKING:
        __slots__ = ()
    session_id: str
    _agent: Agent
    _bash_run: BashRun | None
    _control: PromptController
    _compaction: Compaction

    def busy_with(self) -> tuple[str, ...]:
        """What the session is still doing, one phrase each; empty when it is idle.

        Returns:
            Phrases such as ``"a prompt is running"``, ``"a retry chain is waiting out
                its backoff (attempt 1)"``, ``"a request to openai is in flight"``,
                ``"a bash command is running"``, in that order.
        """
        busy: list[str] = []
        if self._control.running:
            busy.append("a prompt is running")
        chain = self._control.live_chain
        if chain is not None:
            doing = "is waiting out its backoff" if chain.waiting else "is alive"
            busy.append(f"a retry chain {doing} (attempt {chain.attempt})")
        if self._compaction.running:
            busy.append("a compaction is running")
        if self._agent.streaming:
            busy.append(f"a request to {self._agent.provider.name} is in flight")
        if self._bash_run is not None:
            busy.append("a bash command is running")
        return tuple(busy)

    def assert_idle(self) -> None:
        """Raise unless nothing of the session is running: for tests and health checks.

        Raises:
            AssertionError: something still runs; the message names the session and
                everything ``busy_with`` lists, e.g. ``"session 1a2b3c4d5e6f is not
                idle: a prompt is running; a request to openai is in flight"``.
        """
        busy = self.busy_with()
        if busy:
            msg = f"session {self.session_id[:12]} is not idle: {'; '.join(busy)}"
            raise AssertionError(msg)
