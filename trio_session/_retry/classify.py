"""Which errors retry, which overflow, and what the server asked us to wait.

Classification is plain text matching on ``errorMessage`` (R-6, R-52): the
provider adapters put the HTTP status, the server's message and the retry
headers into that text, and the patterns of ``.patterns`` decide. Everything here
is pure.

Two classifiers ship:

* ``REFERENCE_CLASSIFIER`` — the reference's rules, exactly (R-4, R-5, R-7).
  It is the default.
* ``STRICT_CLASSIFIER`` — ``retry.classifier: "strict"`` (R-8): status codes
  must stand alone (``0429`` inside a model name is not a 429), billing and quota
  errors are never retried, and a per-minute token rate limit is not mistaken
  for a context overflow.

An application can build its own ``PatternClassifier`` or pass any object
with the two methods of ``Classifier``.
"""

from __future__ import annotations

import re
from typing import Protocol

import attrs

from .._errors import (
    ProviderError,
)
from .._messages import AssistantMessage
from .patterns import (
    OVERFLOW_PATTERNS,
    RETRYABLE_PATTERN,
    STRICT_NON_RETRYABLE_PATTERN,
    STRICT_NOT_OVERFLOW_PATTERN,
    STRICT_RETRYABLE_PATTERN,
    is_retryable,
    overflow_matches,
    overflow_search,
    overflows,
    reply_error,
)


class Classifier(Protocol):
    """Decides what happens to an assistant message that ended a run."""

    def is_context_overflow(
        self, message: AssistantMessage, context_window: int | None = None
    ) -> bool:
        """Whether the message means the context no longer fits (goes to compaction).

        Args:
            message: the assistant message that ended the run.
            context_window: the model's window in tokens; with it, a reply whose usage
                is past the window counts as an overflow too.
        """
        ...

    def is_retryable(self, message: AssistantMessage, context_window: int | None = None) -> bool:
        """Whether the message is a transient error the retry policy should handle.

        Args:
            message: the assistant message that ended the run.
            context_window: the model's window in tokens (an overflow is not retried).
        """
        ...


@attrs.frozen
class PatternClassifier:
    """A classifier made of regular expressions (R-4 … R-8).

    Attributes:
        name: shown in docs and errors (``"reference"``, ``"strict"``).
        retryable: searched in ``errorMessage``; a match means transient.
        overflow: any match means context overflow.
        non_retryable: if given, a match vetoes ``retryable``.
        not_overflow: if given, a match vetoes ``overflow`` (the no-body rule still applies).
    """

    name: str
    retryable: re.Pattern[str]
    overflow: tuple[re.Pattern[str], ...]
    non_retryable: re.Pattern[str] | None = None
    not_overflow: re.Pattern[str] | None = None
    _overflow_search: re.Pattern[str] | tuple[re.Pattern[str], ...] = attrs.field(
        init=False,
        eq=False,
        repr=False,
        default=attrs.Factory(lambda self: overflow_search(self.overflow), takes_self=True),
    )

    def is_context_overflow(
        self, message: AssistantMessage, context_window: int | None = None
    ) -> bool:
        """R-7: an overflow error by wording, or a silent one by reported usage.

        Args:
            message: the assistant message.
            context_window: the model's context window in tokens; without it, a silent overflow is
                not seen.
        """
        return overflows(message, context_window, self._overflow_search, self.not_overflow)

    def _overflows(self, text: str) -> bool:
        """Whether any of the ``overflow`` patterns matches ``text``."""
        return overflow_matches(text, self._overflow_search)

    def is_retryable(self, message: AssistantMessage, context_window: int | None = None) -> bool:
        """R-4: an error, with a message, not an overflow, matching the pattern.

        Args:
            message: the assistant message.
            context_window: the model's context window in tokens, for the overflow check.
        """
        return is_retryable(
            message,
            context_window,
            self.retryable,
            self._overflow_search,
            self.non_retryable,
            self.not_overflow,
        )


REFERENCE_CLASSIFIER = PatternClassifier(
    name="reference", retryable=RETRYABLE_PATTERN, overflow=OVERFLOW_PATTERNS
)
"""The reference's classifier (R-5, R-7): its retryable pattern and overflow wordings,
searched anywhere in the error text. The default."""
STRICT_CLASSIFIER = PatternClassifier(
    name="strict",
    retryable=STRICT_RETRYABLE_PATTERN,
    overflow=OVERFLOW_PATTERNS,
    non_retryable=STRICT_NON_RETRYABLE_PATTERN,
    not_overflow=STRICT_NOT_OVERFLOW_PATTERN,
)
"""A stricter classifier (R-8): status codes only as whole numbers, wordings the reference
misses, and texts that look retryable or like an overflow but are not."""
CLASSIFIERS: dict[str, PatternClassifier] = {
    "reference": REFERENCE_CLASSIFIER,
    "strict": STRICT_CLASSIFIER,
}


def is_context_overflow(message: AssistantMessage, context_window: int | None = None) -> bool:
    """The reference's overflow check (R-7).

    Args:
        message: the assistant message that ended the run.
        context_window: the model's window in tokens; with it, a reply whose usage
            is past the window counts as an overflow too.
    """
    return REFERENCE_CLASSIFIER.is_context_overflow(message, context_window)


def is_retryable_error(message: AssistantMessage, context_window: int | None = None) -> bool:
    """The reference's retryable check (R-4, R-5).

    Args:
        message: the assistant message that ended the run.
        context_window: the model's window in tokens (an overflow is not retried).
    """
    return REFERENCE_CLASSIFIER.is_retryable(message, context_window)


def provider_error(message: AssistantMessage, context_window: int | None = None) -> ProviderError:
    """The ``ProviderError`` for a failed reply, its class read from the error text (R-52).

    In order: context overflow (R-7's patterns); authentication (401, 403, "invalid api
    key"); rate limit (429, "rate limit", "usage limit", quota); overloaded (503, 529,
    "overloaded"); other server errors (5xx); connection errors ("Connection error",
    timeouts); anything else is a plain ``ProviderError``.

    Args:
        message: the assistant message that ended in an error.
        context_window: the model's window in tokens, for the overflow check.
    """
    return reply_error(message, context_window)
