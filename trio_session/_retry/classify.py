"""Which errors retry, which overflow, and what the server asked us to wait.

Classification is plain text matching on ``errorMessage`` (R-6, R-52): the
provider adapters put the HTTP status, the server's message and the retry
headers into that text, and these patterns decide. Everything here is pure. The rules
themselves read a reply through a Protocol in ``.reply`` (``PatternRules``, ``reply_error``),
below ``_messages``, whose ``raise_for_error`` uses them; here they are typed
``AssistantMessage``.

Three classifiers ship, each built from its table of named patterns (``tables.py``):

* ``REFERENCE_CLASSIFIER`` — the seed profile: the contract's rules, exactly
  (R-4, R-5, R-7; ``SEED_PATTERNS``). It is the default.
* ``PI_1_6_CLASSIFIER`` — the pi-1.6 profile: pi 1.6.0's own lists, pattern for
  pattern (R-58; ``PI_1_6_PATTERNS``).
* ``STRICT_CLASSIFIER`` — ``retry.classifier: "strict"`` (R-8, R-60): status codes
  must stand alone (``0429`` inside a model name is not a 429), billing and quota
  errors are never retried, a per-minute token rate limit is not mistaken for a
  context overflow, and pi 1.6.0's wider transport wordings retry
  (``STRICT_PATTERNS``).

``classifier_for(profile)`` names them.

An application can build its own ``PatternClassifier`` or pass any object
with the two methods of ``Classifier``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Protocol

from .._core.classes import frozen
from .._core.errors import ProviderError
from .._core.messages import AssistantMessage
from .._settings.values import RetryProfile
from .reply import MAX_HINT_MS as MAX_HINT_MS
from .reply import PatternRules, reply_error
from .reply import error_status as error_status
from .reply import parse_retry_after_ms as parse_retry_after_ms
from .tables import PI_1_6_PATTERNS, SEED_PATTERNS, STRICT_PATTERNS, PatternTable

# The shipped patterns and classifiers are compiled when first read, not on import: a
# program that never meets an error never pays for them (``_LAZY``, ``__getattr__``).
if TYPE_CHECKING:
    RETRYABLE_PATTERN: re.Pattern[str]
    """R-5: the reference's retryable pattern, searched anywhere, case-insensitive."""

    OVERFLOW_PATTERNS: tuple[re.Pattern[str], ...]
    """R-7(a): context-overflow wordings of the major providers (the reference's list, plus
    ``request_too_large`` as the contract names it)."""

    NO_BODY_OVERFLOW_PATTERN: re.Pattern[str]
    """R-7(a): Cerebras-style "400 status code (no body)" / "413 (no body)" at the start."""

USAGE_LIMIT_PATTERN = re.compile(r"usage.?limit|usage_limit_reached|limit_reached", re.IGNORECASE)
"""R-17: an error that means this credential hit its usage limit."""

CONNECTION_LIMIT_PATTERN = re.compile(r"connection.?limit.?reached", re.IGNORECASE)
"""R-53b: a connection's lifetime limit (Codex's ``websocket_connection_limit_reached``), which
R-17's ``limit_reached`` also matches: pi 1.6.0 retries it on a fresh connection, so under
``"pi-1.6"`` it is not a usage limit."""


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


@frozen
class PatternClassifier(PatternRules):
    """A classifier made of regular expressions (R-4 … R-8, R-57 … R-60).

    An overflow by wording (R-7(a)) is a match of ``overflow`` or of ``bodyless_overflow``
    (for a message from one of ``bodyless_providers``, or any provider when that is
    ``None``) that ``not_overflow`` does not veto. ``classifier_for`` gives the shipped
    ones; ``from_table`` builds one from a ``PatternTable``.

    Attributes:
        name: shown in docs and errors (``"reference"``, ``"pi-1.6"``, ``"strict"``).
        retryable: searched in ``errorMessage``; a match means transient.
        overflow: any match means context overflow.
        non_retryable: if given, a match vetoes ``retryable``.
        not_overflow: if given, a match vetoes an overflow by wording.
        bodyless_overflow: a bare "400/413 status code (no body)" at the start of the text
            (R-7(a)); ``None`` for no such rule.
        bodyless_providers: if given, ``bodyless_overflow`` counts only for these providers.
        length_overflow: whether a ``length`` stop with no output whose input fills 99 % of
            the window is an overflow too (pi's third case; R-58).
    """

    @classmethod
    def from_table(cls, table: PatternTable, name: str | None = None) -> PatternClassifier:
        """The classifier a table describes: its lists joined as pi joins them.

        Args:
            table: the patterns (``SEED_PATTERNS``, ``PI_1_6_PATTERNS``, ``STRICT_PATTERNS``
                or one of your own).
            name: the classifier's name; the table's by default.

        Returns:
            The classifier.
        """
        return cls._from_table(table, name)

    def is_context_overflow(
        self, message: AssistantMessage, context_window: int | None = None
    ) -> bool:
        """R-7: an overflow error by wording, or a silent one by reported usage.

        Args:
            message: the assistant message.
            context_window: the model's context window in tokens; without it, a silent overflow is
                not seen.
        """
        return self._overflow_of(message, context_window)

    def is_retryable(self, message: AssistantMessage, context_window: int | None = None) -> bool:
        """R-4: an error, with a message, not an overflow, not vetoed, matching the pattern.

        Args:
            message: the assistant message.
            context_window: the model's context window in tokens, for the overflow check.
        """
        return self._retryable(message, lambda: self.is_context_overflow(message, context_window))


if TYPE_CHECKING:
    REFERENCE_CLASSIFIER: PatternClassifier
    """The reference's classifier (R-5, R-7): ``SEED_PATTERNS``, searched anywhere in the
    error text. The default, and the seed profile's."""
    PI_1_6_CLASSIFIER: PatternClassifier
    """pi 1.6.0's classifier (R-58): ``PI_1_6_PATTERNS``, decided as pi 1.6.0's
    ``AgentSession._isRetryableError`` and ``isContextOverflow`` decide. The pi-1.6
    profile's."""
    STRICT_CLASSIFIER: PatternClassifier
    """A stricter classifier (R-8, R-60): ``STRICT_PATTERNS``: status codes only as whole
    numbers, pi 1.6.0's wider transport wordings, and texts that look retryable or like an
    overflow but are not."""


#: The shipped classifiers' tables and names, by profile or ``retry.classifier`` value.
_SHIPPED: dict[str, tuple[PatternTable, str | None]] = {
    "reference": (SEED_PATTERNS, "reference"),
    "seed": (SEED_PATTERNS, "reference"),
    "pi-1.6": (PI_1_6_PATTERNS, None),
    "strict": (STRICT_PATTERNS, None),
}


class _Shipped(Mapping[str, PatternClassifier]):
    """The shipped classifiers by name, each built the first time it is asked for
    (``"seed"`` and ``"reference"`` are one classifier); a dict lookup after that."""

    def __init__(self) -> None:
        self._built: dict[str, PatternClassifier] = {}

    def __getitem__(self, key: str) -> PatternClassifier:
        built = self._built.get(key)
        if built is None:
            table, name = _SHIPPED[key]
            twin = next((v for k, v in self._built.items() if _SHIPPED[k][0] is table), None)
            built = self._built[key] = twin or PatternClassifier.from_table(table, name)
        return built

    def __iter__(self) -> Iterator[str]:
        return iter(_SHIPPED)

    def __len__(self) -> int:
        return len(_SHIPPED)


CLASSIFIERS: Mapping[str, PatternClassifier] = _Shipped()
"""The shipped classifiers by profile (``retry.profile``) or ``retry.classifier`` value."""

#: What ``__getattr__`` builds on first read, and from what.
_LAZY = {
    "REFERENCE_CLASSIFIER": lambda: CLASSIFIERS["reference"],
    "PI_1_6_CLASSIFIER": lambda: CLASSIFIERS["pi-1.6"],
    "STRICT_CLASSIFIER": lambda: CLASSIFIERS["strict"],
    "RETRYABLE_PATTERN": lambda: CLASSIFIERS["reference"].retryable,
    "OVERFLOW_PATTERNS": lambda: CLASSIFIERS["reference"].overflow,
    "NO_BODY_OVERFLOW_PATTERN": lambda: SEED_PATTERNS.bodyless_overflow.regex,
}

if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        """The shipped patterns and classifiers, built when first read."""
        make = _LAZY.get(name)
        if make is None:
            msg = f"module {__name__!r} has no attribute {name!r}"
            raise AttributeError(msg)
        value = globals()[name] = make()
        return value


def classifier_for(profile: str) -> PatternClassifier:
    """The shipped classifier of a profile or ``retry.classifier`` value (R-57).

    Args:
        profile: ``"seed"`` (also ``"reference"``), ``"pi-1.6"`` or ``"strict"``.

    Returns:
        ``REFERENCE_CLASSIFIER``, ``PI_1_6_CLASSIFIER`` or ``STRICT_CLASSIFIER``.

    Raises:
        ValueError: ``profile`` names no shipped classifier.
    """
    try:
        return CLASSIFIERS[profile]
    except KeyError:
        names = ", ".join(repr(name) for name in CLASSIFIERS)
        msg = f"no classifier is named {profile!r} (one of {names})"
        raise ValueError(msg) from None


def is_context_overflow(message: AssistantMessage, context_window: int | None = None) -> bool:
    """The reference's overflow check (R-7).

    Args:
        message: the assistant message that ended the run.
        context_window: the model's window in tokens; with it, a reply whose usage
            is past the window counts as an overflow too.
    """
    return CLASSIFIERS["reference"].is_context_overflow(message, context_window)


def is_retryable_error(message: AssistantMessage, context_window: int | None = None) -> bool:
    """The reference's retryable check (R-4, R-5).

    Args:
        message: the assistant message that ended the run.
        context_window: the model's window in tokens (an overflow is not retried).
    """
    return CLASSIFIERS["reference"].is_retryable(message, context_window)


def is_usage_limit_error(text: str, *, profile: RetryProfile = "seed") -> bool:
    """R-17: whether an error text says the credential hit its usage limit.

    Under ``"pi-1.6"`` a connection's lifetime limit is not one (R-53b): pi 1.6.0 retries
    ``websocket_connection_limit_reached``, where R-17's pattern alone would send it to the
    credential store.

    Args:
        text: an error message.
        profile: the retry profile in effect (``retry.profile``).
    """
    if USAGE_LIMIT_PATTERN.search(text) is None:
        return False
    return profile != "pi-1.6" or CONNECTION_LIMIT_PATTERN.search(text) is None


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
