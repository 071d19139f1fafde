"""The steering and follow-up queues (R-36a): their public face on ``AgentSession``.

The queues themselves are the agent's (``MessageQueue``): steering is delivered after a
turn, before the next request; follow-ups when a run would otherwise stop.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .._agent import QUEUE_MODES, MessageQueue, QueueMode
from .._errors import SessionClosedError
from .._messages import ImageContent, UserMessage
from .._text import valid_text
from .models import remember

if TYPE_CHECKING:
    from .._agent import Agent
    from .._retry.controller import PromptController
    from .._settings import SettingsStore
    from .hub import EventHub

logger = logging.getLogger("trio_session")


def queue_mode(mode: str) -> QueueMode:
    """``mode`` as a ``QueueMode``; ``ValueError`` for anything else.

    Args:
        mode: ``"all"`` or ``"one-at-a-time"``.
    """
    for known in QUEUE_MODES:
        if mode == known:
            return known
    msg = f'unknown queue mode {mode!r}: expected "all" or "one-at-a-time"'
    raise ValueError(msg)


class QueuesPart:
    """``AgentSession``'s queues (a base class of the facade)."""

    if not TYPE_CHECKING:
        __slots__ = ()
    _agent: Agent
    _settings: SettingsStore
    _hub: EventHub
    _control: PromptController

    @property
    def steering_mode(self) -> QueueMode:
        """How many steering messages a delivery takes: ``"one-at-a-time"`` (the
        default) or ``"all"``."""
        return self._agent.steering.mode

    @property
    def follow_up_mode(self) -> QueueMode:
        """How many follow-ups a delivery takes: ``"one-at-a-time"`` (the default) or
        ``"all"``."""
        return self._agent.follow_ups.mode

    def set_steering_mode(self, mode: str) -> None:
        """Set ``steering_mode``; saved as the settings' ``steeringMode`` (as the
        reference saves it), so later sessions of the same settings start with it.

        Args:
            mode: ``"all"`` (deliver every queued message at once) or
                ``"one-at-a-time"``.

        Raises:
            ValueError: ``mode`` is not ``"all"`` or ``"one-at-a-time"``.
        """
        self._agent.steering.mode = queue_mode(mode)
        remember(self._settings, "steeringMode", mode)

    def set_follow_up_mode(self, mode: str) -> None:
        """Set ``follow_up_mode`` (``ValueError`` for anything but the two modes); saved
        as the settings' ``followUpMode``.

        Args:
            mode: ``"all"`` or ``"one-at-a-time"``, as for ``set_steering_mode``.
        """
        self._agent.follow_ups.mode = queue_mode(mode)
        remember(self._settings, "followUpMode", mode)

    @property
    def steering_messages(self) -> tuple[str, ...]:
        """The texts of the queued steering messages, oldest first."""
        return self._agent.steering.texts

    @property
    def follow_up_messages(self) -> tuple[str, ...]:
        """The texts of the queued follow-up messages, oldest first."""
        return self._agent.follow_ups.texts

    @property
    def pending_message_count(self) -> int:
        """Queued messages, steering and follow-up together."""
        return len(self._agent.steering.messages) + len(self._agent.follow_ups.messages)

    def steer(self, text: str, images: Sequence[ImageContent] = ()) -> None:
        """Queue a message for the running prompt: it is delivered after the current
        turn (its tool calls included), before the next request.

        During a retry's backoff sleep it is delivered before the re-attempt's
        request, which then sends it. When nothing runs — or the prompt ends first
        (an error, ``abort``, ``abort_retry``) — it stays queued and goes with the
        next prompt; ``clear_queue`` takes it back. Emits ``queue_update``.

        Args:
            text: the message's text.
            images: images sent after the text.
        """
        self._queue(self._agent.steering, text, images)

    def follow_up(self, text: str, images: Sequence[ImageContent] = ()) -> None:
        """Queue a message for when the running prompt would otherwise stop.

        A prompt in a retry chain delivers it once the chain has succeeded. A
        prompt that ends in an error or is aborted leaves it queued, for the next
        prompt; ``clear_queue`` takes it back. Emits ``queue_update``.

        Args:
            text: the message's text.
            images: images sent after the text.
        """
        self._queue(self._agent.follow_ups, text, images)

    def clear_queue(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Take every queued message back: ``(steering texts, follow-up texts)``.

        Emits ``queue_update`` (with both queues empty).
        """
        taken = (self.steering_messages, self.follow_up_messages)
        self._agent.steering.messages.clear()
        self._agent.follow_ups.messages.clear()
        self._hub.emit(self._agent.queue_update())
        return taken

    def _queue(self, queue: MessageQueue, text: str, images: Sequence[ImageContent]) -> None:
        if self._control.closed:
            msg = "the session is closed"
            raise SessionClosedError(msg)
        text, replaced = valid_text(text)
        if replaced:
            logger.warning("queued text held %d lone surrogate code point(s); replaced", replaced)
        queue.messages.append(UserMessage.of(text, tuple(images)))
        self._hub.emit(self._agent.queue_update())
