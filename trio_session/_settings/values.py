"""Settings values: the ``retry``, ``compaction``, ``credentials``, ``http`` and
``rateLimit`` groups and their rules.

Pure: frozen values, the schema every key is checked against (``SCHEMA``, ``RANGES``)
and ``validate_value``; nothing here reads a file. Layers, the store and the files on
disk are ``trio_session._settings.store`` and ``trio_session._settings.files``; the policy
(``trio_session._retry``) imports only this module.
"""

from __future__ import annotations

import reprlib
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

import attrs

from .._core.classes import frozen
from .._core.errors import SettingsError

Jitter: TypeAlias = Literal["none", "full", "equal"]
ClassifierName: TypeAlias = Literal["reference", "strict"]
#: ``retry.profile`` (R-53): whose retry rules the session follows.
RetryProfile: TypeAlias = Literal["seed", "pi-1.6"]
#: The profiles, in the order messages list them.
RETRY_PROFILES: tuple[RetryProfile, ...] = ("seed", "pi-1.6")
#: How queued steering and follow-up messages are delivered (pi's ``steeringMode``).
QueueMode: TypeAlias = Literal["all", "one-at-a-time"]
#: pi's thinking levels (``defaultThinkingLevel``).
ThinkingLevel: TypeAlias = Literal["off", "minimal", "low", "medium", "high", "xhigh"]
PROGRAMMATIC = "<programmatic>"


@frozen
class ProviderRetrySettings:
    """The ``retry.provider`` group: how long one request to the provider may take.

    The key names are pi's. The two timeouts apply where ``trio-session`` builds the
    provider (``chat``, ``rpc``; ``--timeout`` and ``--idle-timeout`` win over them);
    a program that builds its own provider passes its own timeouts.

    Attributes:
        max_retry_delay_ms: ``retry.provider.maxRetryDelayMs`` — the longest
            server-requested wait (``retry.respectRetryAfter``) that is slept when
            ``retry.maxDelayMs`` is unset; a longer one ends the chain with a message
            naming it (R-28). ``0``: no cap.
        timeout_ms: ``retry.provider.timeoutMs`` — total deadline of one attempt,
            from sending the request to the last byte of the answer.
        idle_timeout_ms: ``retry.provider.idleTimeoutMs`` — longest silence while
            reading an answer before the attempt fails.
        max_retries: ``retry.provider.maxRetries`` — pi's retries inside its provider
            SDKs. Accepted and kept, but moot: trio_session's providers never retry on
            their own (R-28a), so a file that sets it gets a warning.
    """

    max_retry_delay_ms: int = 60_000
    timeout_ms: int = 600_000
    idle_timeout_ms: int = 120_000
    max_retries: int | None = None


@frozen
class RetrySettings:
    """The ``retry`` group.

    Attributes:
        enabled: ``retry.enabled`` — auto-retry on transient errors (R-12).
        max_retries: ``retry.maxRetries`` — re-attempts per chain (R-15).
        base_delay_ms: ``retry.baseDelayMs`` — first wait; doubles each attempt (R-16).
        max_delay_ms: ``retry.maxDelayMs`` — cap on any single wait; ``None``: no cap (R-28).
        jitter: ``retry.jitter`` — ``"none"``, ``"full"`` or ``"equal"`` (R-28).
        respect_retry_after: ``retry.respectRetryAfter`` — wait at least what the
            server asked for, on every retryable error (R-28).
        classifier: ``retry.classifier`` — ``"reference"`` or ``"strict"`` (R-8).
        profile: ``retry.profile`` — ``"seed"`` (pi 0.73.1's rules, the default) or
            ``"pi-1.6"`` (pi 1.6.0's) (R-53).
        max_agent_delay_ms: ``retry.maxAgentDelayMs`` — under ``"pi-1.6"``, the cap on
            the exponential wait between attempts (R-53a); not read under ``"seed"``.
        shared_cooldown: ``retry.sharedCooldown`` — a server's wait hint on a key holds
            every session using that key (every worker, with a Redis credential
            store) until it has passed, plus jitter (R-28, docs/fleet.md).
        max_total_ms: ``retry.maxTotalMs`` — the chain's total retry budget: it gives
            up when the next wait would take the time since its first error past it;
            ``None``: no budget (R-61).
        provider: the ``retry.provider`` group.
    """

    enabled: bool = True
    max_retries: int = 3
    base_delay_ms: int = 2000
    max_delay_ms: int | None = None
    jitter: Jitter = "none"
    respect_retry_after: bool = False
    classifier: ClassifierName = "reference"
    profile: RetryProfile = "seed"
    max_agent_delay_ms: int = 60_000
    shared_cooldown: bool = False
    max_total_ms: int | None = None
    provider: ProviderRetrySettings = attrs.field(factory=ProviderRetrySettings)


@frozen
class CompactionSettings:
    """The ``compaction`` group.

    Attributes:
        enabled: ``compaction.enabled`` — recover from context overflow (R-50).
        keep_recent_turns: ``compaction.keepRecentTurns`` — turns the default
            compactor always keeps verbatim.
        reserve_tokens: ``compaction.reserveTokens`` (pi's key) — tokens kept free
            in the context window for the model's answer.
        keep_recent_tokens: ``compaction.keepRecentTokens`` (pi's key) — about how
            many tokens of the most recent messages are kept, not summarised.
    """

    enabled: bool = True
    keep_recent_turns: int = 1
    reserve_tokens: int = 16_384
    keep_recent_tokens: int = 20_000


@frozen
class HttpSettings:
    """The ``http`` group: the HTTP provider ``trio-session`` builds (``chat``, ``rpc``).

    A program that builds its own provider passes ``limits=`` to it instead: one
    provider's pool is shared by every session that uses it, so no one session's
    settings can size it.

    Attributes:
        max_connections: ``http.maxConnections`` — the most connections the
            provider's pool opens at once (as many are kept alive while idle, for
            5 s); a request past that waits for a free one. ``None``: httpx's
            defaults (100, 20 kept alive).
    """

    max_connections: int | None = None


@frozen
class CredentialsSettings:
    """The ``credentials`` group.

    Attributes:
        url: ``credentials.url`` — where ``trio-session chat`` and ``rpc`` keep
            usage-limit blocks: a Redis URL (``redis://``, ``rediss://``, ``unix://``)
            shared by a fleet of workers; ``None``: the local SQLite store.
            ``--credentials URL`` wins over it.
    """

    url: str | None = None


@frozen
class RateLimits:
    """A rate limit: what a provider account allows one model per minute (R-69).

    Attributes:
        requests_per_minute: requests per minute; ``None``: no request limit.
        tokens_per_minute: tokens (prompt and reply) per minute; ``None``: no token limit.
        reply_tokens: the reply size a request reserves before it is sent (its prompt's
            estimate is added); ``None``: the model's ``max_tokens``.
    """

    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    reply_tokens: int | None = None

    @property
    def limited(self) -> bool:
        """Whether a request waits for anything under these limits."""
        return self.requests_per_minute is not None or self.tokens_per_minute is not None


_NO_LIMITS = RateLimits()
#: A model's limits in ``rateLimit.models``: file key -> ``RateLimits`` field.
_SNAKE = {
    "requestsPerMinute": "requests_per_minute",
    "tokensPerMinute": "tokens_per_minute",
    "replyTokens": "reply_tokens",
}


def _model_limits(value: Mapping[str, Any] | None) -> Mapping[str, RateLimits]:
    """``rateLimit.models`` as read from a file: model id -> its ``RateLimits``."""
    if not value:
        return MappingProxyType({})
    return MappingProxyType(
        {
            model: limits
            if isinstance(limits, RateLimits)
            else RateLimits(**{_SNAKE[name]: v for name, v in limits.items()})
            for model, limits in value.items()
        }
    )


@frozen
class RateLimitSettings:
    """The ``rateLimit`` group: the request and token budget every request waits for
    (R-69, ours; docs/fleet.md). Off unless a limit is set, or learning is asked for.

    Attributes:
        requests_per_minute: ``rateLimit.requestsPerMinute`` — requests per minute
            per provider account (key) and model; ``None``: no request limit.
        tokens_per_minute: ``rateLimit.tokensPerMinute`` — tokens per minute, the
            same way; ``None``: no token limit.
        reply_tokens: ``rateLimit.replyTokens`` — the reply size a request reserves
            before it is sent; ``None``: the model's ``max_tokens``.
        models: ``rateLimit.models`` — model id -> its own limits, each key of which
            wins over the group's for that model.
        learn: ``rateLimit.learn`` — ``true``: a limit the settings do not name for a
            model is learned from the rate-limit headers its provider sends (OpenAI's
            ``x-ratelimit-*``, Anthropic's ``anthropic-ratelimit-*``); ``false`` (the
            default): never, so a session with no ``rateLimit`` sends as pi does.
    """

    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    reply_tokens: int | None = None
    models: Mapping[str, RateLimits] = attrs.field(
        factory=dict, converter=_model_limits, hash=False
    )
    learn: bool = False

    def limits(self, model_id: str) -> RateLimits:
        """The limits for ``model_id``: its ``models`` entry over the group's.

        Args:
            model_id: the model's id (``Model.id``).
        """
        own = self.models.get(model_id)
        if own is None:
            if self.requests_per_minute is self.tokens_per_minute is self.reply_tokens is None:
                return _NO_LIMITS  # nothing set: no value to make (asked before every request)
            own = _NO_LIMITS
        return RateLimits(
            requests_per_minute=_first(own.requests_per_minute, self.requests_per_minute),
            tokens_per_minute=_first(own.tokens_per_minute, self.tokens_per_minute),
            reply_tokens=_first(own.reply_tokens, self.reply_tokens),
        )


def _first(a: int | None, b: int | None) -> int | None:
    return a if a is not None else b


def _names_tuple(names: Iterable[str] | None) -> tuple[str, ...] | None:
    return None if names is None else tuple(names)


@frozen
class Settings:
    """Effective settings: every group, every key resolved.

    The top-level keys are pi's (its docs/settings.md), read from any settings file:

    Attributes:
        steering_mode: ``steeringMode`` — steering messages go ``"one-at-a-time"``
            (one per turn) or ``"all"`` at once.
        follow_up_mode: ``followUpMode`` — the same for follow-up messages.
        default_thinking_level: ``defaultThinkingLevel`` — ``"off"`` … ``"xhigh"``,
            or ``None``: unset.
        default_provider: ``defaultProvider`` — the provider used when the command
            line names none.
        default_model: ``defaultModel`` — the model id used when the command line
            names none.
        session_dir: ``sessionDir`` — where pi keeps session files, as written
            (``~`` not expanded); ``None``: unset.
        default_tools: ``defaultTools`` — the coding tools ``chat`` and ``rpc`` give
            the model: plain names replace pi's ``read``, ``bash``, ``edit``, ``write``;
            ``+name`` / ``-name`` entries add or remove one (a file's such list adds
            to the one below it, as pi merges them); ``None``: unset.
        retry: the ``retry`` group.
        compaction: the ``compaction`` group.
        credentials: the ``credentials`` group.
        http: the ``http`` group.
        rate_limit: the ``rateLimit`` group.
    """

    retry: RetrySettings = attrs.field(factory=RetrySettings)
    compaction: CompactionSettings = attrs.field(factory=CompactionSettings)
    credentials: CredentialsSettings = attrs.field(factory=CredentialsSettings)
    http: HttpSettings = attrs.field(factory=HttpSettings)
    rate_limit: RateLimitSettings = attrs.field(factory=RateLimitSettings)
    steering_mode: QueueMode = "one-at-a-time"
    follow_up_mode: QueueMode = "one-at-a-time"
    default_thinking_level: ThinkingLevel | None = None
    default_provider: str | None = None
    default_model: str | None = None
    session_dir: str | None = None
    default_tools: tuple[str, ...] | None = attrs.field(default=None, converter=_names_tuple)


SERVICE_SETTINGS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        "retry": MappingProxyType(
            {"jitter": "equal", "respectRetryAfter": True, "maxTotalMs": 60_000}
        )
    }
)
"""The service preset (R-62): retry settings for a program that runs many sessions.

Pass it as ``open_session(settings=SERVICE_SETTINGS)``, or derive your own from it
with ``settings_with(SERVICE_SETTINGS, {"retry": {"maxRetries": 5}})``:

- ``retry.jitter: "equal"`` spreads the sessions' waits over the upper half of each
  exponential wait, so sessions that failed together do not re-send together (and
  none re-sends at once);
- ``retry.respectRetryAfter: true`` waits at least what the server asked for, up to
  R-28's cap (``retry.provider.maxRetryDelayMs``, 60 s);
- ``retry.maxTotalMs: 60000`` ends a chain whose next wait would take it past 60 s
  since its first error (R-61).

The defaults stay the reference's, for one user at a terminal (R-16).
"""


# -- the schema ----------------------------------------------------------------------


@frozen
class _Rule:
    check: Callable[[Any], bool]
    description: str
    #: For a value with keys inside (``rateLimit.models``): its first bad part, as
    #: (the key's rest, ``".gpt-4o.tokensPerMinute"``, what it must be, the value).
    find: Callable[[Any], tuple[str, str, Any] | None] | None = None


def _is_bool(v: Any) -> bool:
    return isinstance(v, bool)


def _integer(low: int, high: int, *, null: bool = False) -> _Rule:
    def check(v: Any) -> bool:
        if v is None:
            return null
        return isinstance(v, int) and not isinstance(v, bool) and low <= v <= high

    description = f"an integer from {low} to {high}" + (", or null" if null else "")
    return _Rule(check, description)


def _one_of(*choices: str, null: bool = False) -> _Rule:
    listed = ", ".join(f'"{c}"' for c in choices)
    return _Rule(
        lambda v: (v is None and null) or (isinstance(v, str) and v in choices),
        f"one of {listed}" + (", or null" if null else ""),
    )


def _text(*, null: bool = False) -> _Rule:
    return _Rule(
        lambda v: (v is None and null) or (isinstance(v, str) and bool(v.strip())),
        "a non-empty string" + (", or null" if null else ""),
    )


def _path(*, null: bool = False) -> _Rule:
    return _Rule(
        lambda v: (
            (v is None and null) or (isinstance(v, str) and bool(v.strip()) and "\0" not in v)
        ),
        "a non-empty path without a NUL character" + (", or null" if null else ""),
    )


_BOOL = _Rule(_is_bool, "true or false")

#: Every number's inclusive range: dotted key -> (lowest, highest). The bounds make
#: the longest exponential wait, ``3_600_000 * 2 ** 99`` ms, a finite float.
RANGES: Mapping[str, tuple[int, int]] = {
    "retry.maxRetries": (0, 100),
    "retry.baseDelayMs": (0, 3_600_000),
    "retry.maxDelayMs": (1, 86_400_000),
    "retry.maxAgentDelayMs": (0, 86_400_000),
    "retry.maxTotalMs": (1, 86_400_000),
    "retry.provider.maxRetryDelayMs": (0, 86_400_000),
    "retry.provider.timeoutMs": (1_000, 86_400_000),
    "retry.provider.idleTimeoutMs": (1_000, 3_600_000),
    "retry.provider.maxRetries": (0, 100),
    "compaction.keepRecentTurns": (1, 1_000),
    "compaction.reserveTokens": (0, 10_000_000),
    "compaction.keepRecentTokens": (0, 10_000_000),
    "http.maxConnections": (1, 100_000),
    "rateLimit.requestsPerMinute": (1, 100_000_000),
    "rateLimit.tokensPerMinute": (1, 100_000_000_000),
    "rateLimit.replyTokens": (1, 10_000_000),
}


#: A list of tool names (``defaultTools``): each a non-empty string.
_NAMES = _Rule(
    lambda v: (
        v is None
        or (isinstance(v, list | tuple) and all(isinstance(n, str) and n.strip() for n in v))
    ),
    "a list of tool names, or null",
)


def _ranged(key: str, *, null: bool = False) -> _Rule:
    return _integer(*RANGES[key], null=null)


_LIMITS_OBJECT = "an object with requestsPerMinute, tokensPerMinute, replyTokens"


def _bad_model_limits(value: Any) -> tuple[str, str, Any] | None:
    """The first bad part of a ``rateLimit.models`` value, if any (see ``_Rule.find``)."""
    if not isinstance(value, Mapping):
        return "", "an object of model ids to their limits", value
    for model, limits in value.items():
        if not isinstance(model, str) or not model.strip():
            return "", "an object keyed by non-empty model ids", model
        where = f".{model}" if len(model) <= 80 else f".{model[:80]}…"
        if isinstance(limits, RateLimits):
            continue
        if not isinstance(limits, Mapping):
            return where, _LIMITS_OBJECT, limits
        for name, v in limits.items():
            if name not in _SNAKE:
                return where, _LIMITS_OBJECT, limits
            rule = SCHEMA[f"rateLimit.{name}"]
            if not rule.check(v):
                return f"{where}.{name}", rule.description, v
    return None


_MODEL_LIMITS = _Rule(lambda v: _bad_model_limits(v) is None, "", find=_bad_model_limits)


#: Every key, dotted, in the order errors list them.
SCHEMA: dict[str, _Rule] = {
    "retry.enabled": _BOOL,
    "retry.maxRetries": _ranged("retry.maxRetries"),
    "retry.baseDelayMs": _ranged("retry.baseDelayMs"),
    "retry.maxDelayMs": _ranged("retry.maxDelayMs", null=True),
    "retry.jitter": _one_of("none", "full", "equal"),
    "retry.respectRetryAfter": _BOOL,
    "retry.classifier": _one_of("reference", "strict"),
    "retry.profile": _one_of(*RETRY_PROFILES),
    "retry.maxAgentDelayMs": _ranged("retry.maxAgentDelayMs"),
    "retry.sharedCooldown": _BOOL,
    "retry.maxTotalMs": _ranged("retry.maxTotalMs", null=True),
    "retry.provider.maxRetryDelayMs": _ranged("retry.provider.maxRetryDelayMs"),
    "retry.provider.timeoutMs": _ranged("retry.provider.timeoutMs"),
    "retry.provider.idleTimeoutMs": _ranged("retry.provider.idleTimeoutMs"),
    "retry.provider.maxRetries": _ranged("retry.provider.maxRetries", null=True),
    "compaction.enabled": _BOOL,
    "compaction.keepRecentTurns": _ranged("compaction.keepRecentTurns"),
    "compaction.reserveTokens": _ranged("compaction.reserveTokens"),
    "compaction.keepRecentTokens": _ranged("compaction.keepRecentTokens"),
    "credentials.url": _text(null=True),
    "http.maxConnections": _ranged("http.maxConnections", null=True),
    "rateLimit.requestsPerMinute": _ranged("rateLimit.requestsPerMinute", null=True),
    "rateLimit.tokensPerMinute": _ranged("rateLimit.tokensPerMinute", null=True),
    "rateLimit.replyTokens": _ranged("rateLimit.replyTokens", null=True),
    "rateLimit.models": _MODEL_LIMITS,
    "rateLimit.learn": _BOOL,
    # pi's top-level keys that trio_session uses
    "steeringMode": _one_of("all", "one-at-a-time"),
    "followUpMode": _one_of("all", "one-at-a-time"),
    "defaultThinkingLevel": _one_of("off", "minimal", "low", "medium", "high", "xhigh", null=True),
    "defaultProvider": _text(null=True),
    "defaultModel": _text(null=True),
    "sessionDir": _path(null=True),
    "defaultTools": _NAMES,
}
GROUPS = ("retry", "compaction", "credentials", "http", "rateLimit")
#: Groups inside a group: their keys are nested one level deeper in a file.
SUBGROUPS = frozenset({"retry.provider"})

#: pi's other settings (its docs/settings.md and settings-manager.js, 0.73.1): accepted
#: in any file and kept there, never used, never checked — they are pi's to judge.
#: ``queueMode`` and ``websockets`` are pi's legacy spellings of ``steeringMode`` and
#: ``transport``.
PI_ONLY_KEYS: frozenset[str] = frozenset(
    {
        "hideThinkingBlock",
        "thinkingBudgets",
        "theme",
        "quietStartup",
        "collapseChangelog",
        "enableInstallTelemetry",
        "doubleEscapeAction",
        "treeFilterMode",
        "editorPaddingX",
        "autocompleteMaxVisible",
        "showHardwareCursor",
        "warnings",
        "branchSummary",
        "transport",
        "terminal",
        "images",
        "shellPath",
        "shellCommandPrefix",
        "npmCommand",
        "enabledModels",
        "markdown",
        "packages",
        "extensions",
        "skills",
        "prompts",
        "themes",
        "enableSkillCommands",
        "lastChangelogVersion",
        "queueMode",
        "websockets",
    }
)
#: ``retry.provider.maxRetries`` above 0 in a file: said once per file, as a warning. 0 —
#: pi's own recommendation — is what the providers do anyway (R-28a), so it loads silently.
MOOT_PROVIDER_RETRIES = (
    "retry.provider.maxRetries has no effect in trio-session: its providers never "
    "retry on their own, the session's retry policy (retry.maxRetries) does"
)

#: How a value is shown in a message: short, whatever its size or depth.
_SHOWN = reprlib.Repr()
_SHOWN.maxlevel = 3
_SHOWN.maxstring = 60
_SHOWN.maxlong = 40
_SHOWN.maxother = 60


def _shown(value: Any) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        try:
            return cut_number(str(value))
        except ValueError:  # too long for str(): only a program can pass one
            return f"an integer of {value.bit_length()} bits"
    return _SHOWN.repr(value)


def cut_number(number: str) -> str:
    """A long number as its first digits and its length: ``100000000000… (401 digits)``."""
    if len(number) <= 40:
        return number
    digits = sum(c.isdigit() for c in number)
    return f"{number[:12]}… ({digits} digits)"


def unknown_message(key: str, source: str) -> str:
    group, _, name = key.partition(".")
    shown = key if len(key) <= 80 else key[:80] + "…"
    if group not in GROUPS or not name:
        known = ", ".join(f"{g}.*" for g in GROUPS)
        return f"{shown} is not a known setting (known groups: {known}) (in {source})"
    known = ", ".join(k.partition(".")[2] for k in SCHEMA if k.startswith(f"{group}."))
    return f"{shown} is not a known setting (known {group} keys: {known}) (in {source})"


def validate_value(key: str, value: Any, *, source: str = PROGRAMMATIC) -> Any:
    """Check one dotted key (``"retry.maxRetries"``, ``"steeringMode"``) and its value.

    Returns the value.

    Raises:
        SettingsError: unknown key, or a value of the wrong type or out of its range.
    """
    rule = SCHEMA.get(key)
    if rule is None:
        raise SettingsError(unknown_message(key, source), key=key, source=source)
    if not rule.check(value):
        part, description, shown = (rule.find(value) if rule.find is not None else None) or (
            "",
            rule.description,
            value,
        )
        msg = f"{key}{part} must be {description}, not {_shown(shown)} (in {source})"
        raise SettingsError(msg, key=key, source=source)
    return value
