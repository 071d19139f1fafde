"""The classifier tables: each profile's retryable, never-retry and overflow patterns (R-57).

A table is what a classifier is made of (``classify.py`` builds one from it). Three ship,
one per profile of SPEC §12 plus our own:

```text
SEED_PATTERNS    "seed"    R-5 and R-7(a) as the contract words them (pi 0.73.1's design)
PI_1_6_PATTERNS  "pi-1.6"  @earendil-works/pi-ai 1.6.0, pattern for pattern (R-58)
STRICT_PATTERNS  "strict"  pi 1.6.0's lessons plus our corpus's (R-8, R-60)
```

Every pattern has a name and a family (``"status"``, ``"transport"``, ``"quota"`` …) so
that docs and tests can point at it. The pi-1.6 and strict tables are written as pi writes
them, in JavaScript regex syntax with the ``i`` flag, and compiled so that Python matches
exactly what node matches (``js_regex``); the seed table is the contract's own Python.

Pure data: nothing here reads a file or a clock.
"""

from __future__ import annotations

import re
from typing import Literal, TypeAlias

import attrs

from .._core.classes import frozen

Dialect: TypeAlias = Literal["python", "javascript"]

#: What JavaScript's ``\s`` matches (ECMA-262 WhiteSpace and LineTerminator).
_JS_SPACE = r"\t\n\x0b\x0c\r \xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
#: What JavaScript's ``.`` does not match without the ``s`` flag (LineTerminator).
_JS_LINE_END = r"\n\r\u2028\u2029"


def js_regex(source: str) -> re.Pattern[str]:
    """Compile a JavaScript regex (flag ``i``, no ``u``) so that Python matches as node does.

    Python and JavaScript read the same source differently in four places; each is
    rewritten: ``.`` (JavaScript's stops at ``\\r``, U+2028 and U+2029 too), ``\\s`` and
    ``\\S`` (JavaScript's include U+FEFF and omit U+001C–U+001F), ``$`` (Python's also
    matches before a final newline) and case folding (JavaScript's ``i`` without ``u``
    folds an ASCII letter only with ASCII: Python's folds ``K`` with the Kelvin sign, so
    the pattern is compiled with ``re.ASCII``, which also makes ``\\w``, ``\\d`` and
    ``\\b`` ASCII, as in JavaScript).

    Args:
        source: the regex as JavaScript writes it between the slashes.

    Returns:
        The compiled pattern (``re.IGNORECASE | re.ASCII``).

    Raises:
        ValueError: the source uses syntax this translation does not cover.
    """
    out: list[str] = []
    in_class = False
    i = 0
    while i < len(source):
        char = source[i]
        if char == "\\":
            escape = source[i : i + 2]
            if escape == "\\s":
                out.append(_JS_SPACE if in_class else f"[{_JS_SPACE}]")
            elif escape == "\\S" and not in_class:
                out.append(f"[^{_JS_SPACE}]")
            elif escape[1:] in ("S", "p", "P", "k", "u", "c") or escape[1:].isdigit():
                msg = f"unsupported JavaScript regex escape {escape!r} in {source!r}"
                raise ValueError(msg)
            else:
                out.append(escape)
            i += 2
            continue
        if in_class:
            in_class = char != "]"
            out.append(char)
        elif char == "[":
            in_class = True
            out.append(char)
        elif char == ".":
            out.append(f"[^{_JS_LINE_END}]")
        elif char == "$":
            out.append(r"\Z")
        else:
            out.append(char)
        i += 1
    return re.compile("".join(out), re.IGNORECASE | re.ASCII)


@frozen
class NamedPattern:
    """One pattern of a classifier table.

    Attributes:
        name: its name, unique in its table (``"status-code"``, ``"socket-error-code"``).
        family: what kind of failure it names (``"status"``, ``"transport"``, ``"quota"``).
        source: the regex as its origin writes it (pi's JavaScript source, verbatim, for
            the pi-1.6 table).
        regex: ``source`` compiled; case-insensitive. Given, or compiled from ``source``
            in ``dialect`` when first read (so importing the tables compiles nothing).
        providers: if given, the pattern counts only for a message from one of these
            providers (pi 1.6.0's Cerebras no-body rule).
        dialect: how ``source`` is compiled when ``regex`` is not given: ``"python"``
            (``re.compile`` with ``re.IGNORECASE``) or ``"javascript"`` (``js_regex``).
    """

    name: str
    family: str
    source: str
    _regex: re.Pattern[str] | None = attrs.field(default=None, alias="regex", eq=False)
    providers: frozenset[str] | None = None
    dialect: Dialect = "python"

    @property
    def regex(self) -> re.Pattern[str]:
        """``source`` compiled (once)."""
        if self._regex is None:
            object.__setattr__(self, "_regex", compile_source(self.dialect, self.source))
        assert self._regex is not None
        return self._regex


@frozen
class PatternTable:
    """A classifier's patterns, with where they came from.

    Attributes:
        name: the profile or ``retry.classifier`` value it serves.
        version: what it is a copy of (``"@earendil-works/pi-ai 1.6.0"``).
        provenance: the files and functions of the origin, per list.
        dialect: ``"javascript"`` (compiled by ``js_regex``) or ``"python"``.
        retryable: a match means a transient error (R-4).
        never_retry: a match vetoes ``retryable`` (quota, billing, credentials).
        overflow: a match means a context overflow (R-7(a)).
        not_overflow: a match vetoes ``overflow`` (throttling worded like an overflow).
        bodyless_overflow: a bare "400/413 status code (no body)" at the start; its
            ``providers``, if any, limit it.
        length_overflow: whether a ``length`` stop with no output and input filling 99 %
            of the window is an overflow (pi's third case).
    """

    name: str
    version: str
    provenance: str
    dialect: Dialect
    retryable: tuple[NamedPattern, ...]
    never_retry: tuple[NamedPattern, ...]
    overflow: tuple[NamedPattern, ...]
    not_overflow: tuple[NamedPattern, ...]
    bodyless_overflow: NamedPattern
    length_overflow: bool

    def joined(self, patterns: tuple[NamedPattern, ...]) -> re.Pattern[str]:
        """The patterns as one alternation, as pi joins them (``new RegExp(list.join("|"))``).

        Args:
            patterns: one of this table's lists, not empty.

        Returns:
            One compiled pattern that matches where any of them does.

        Raises:
            ValueError: ``patterns`` is empty (an empty alternation would match everything).
        """
        if not patterns:
            msg = f"the {self.name} table has no patterns to join"
            raise ValueError(msg)
        return compile_source(self.dialect, "|".join(p.source for p in patterns))


def compile_source(dialect: Dialect, source: str) -> re.Pattern[str]:
    """``source`` compiled as ``dialect`` writes it, case-insensitive.

    Args:
        dialect: ``"javascript"`` (``js_regex``) or ``"python"``.
        source: the pattern's source.
    """
    if dialect == "javascript":
        return js_regex(source)
    return re.compile(source, re.IGNORECASE)


def _pattern(dialect: Dialect, name: str, family: str, source: str) -> NamedPattern:
    return NamedPattern(name, family, source, dialect=dialect)


def _patterns(dialect: Dialect, *rows: tuple[str, str, str]) -> tuple[NamedPattern, ...]:
    return tuple(_pattern(dialect, *row) for row in rows)


def _py(*rows: tuple[str, str, str]) -> tuple[NamedPattern, ...]:
    return _patterns("python", *rows)


def _js(*rows: tuple[str, str, str]) -> tuple[NamedPattern, ...]:
    return _patterns("javascript", *rows)


_NO_BODY = r"^4(00|13)\s*(status code)?\s*\(no body\)"

SEED_PATTERNS = PatternTable(
    name="seed",
    version="SPEC R-5 and R-7(a) (pi 0.73.1's design document)",
    provenance=(
        "retryable: the design document's pattern, SPEC R-5 word for word (pi 0.73.1's own"
        " agent-session.js AgentSession._isRetryableError is wider; docs/spec.md R-58 lists"
        " where). overflow: @mariozechner/pi-ai 0.73.1 dist/utils/overflow.js"
        " OVERFLOW_PATTERNS as R-7(a) names them, without its NON_OVERFLOW_PATTERNS veto."
    ),
    dialect="python",
    retryable=_py(
        ("overloaded", "load", "overloaded"),
        ("rate-limit", "rate", "rate.?limit"),
        ("usage-limit", "rate", "usage.?limit"),
        ("too-many-requests", "rate", "too many requests"),
        ("status-429", "status", "429"),
        ("status-500", "status", "500"),
        ("status-502", "status", "502"),
        ("status-503", "status", "503"),
        ("status-504", "status", "504"),
        ("service-unavailable", "server", "service.?unavailable"),
        ("server-error", "server", "server error"),
        ("internal-error", "server", "internal error"),
        ("connection-error", "transport", "connection.?error"),
        ("fetch-failed", "transport", "fetch failed"),
        ("retry-delay", "retry-hint", "retry delay"),
    ),
    never_retry=(),
    overflow=_py(
        ("anthropic", "overflow", r"prompt is too long"),
        ("bedrock", "overflow", r"input is too long for requested model"),
        ("openai", "overflow", r"exceeds the context window"),
        ("gemini", "overflow", r"input token count.*exceeds the maximum"),
        ("xai", "overflow", r"maximum prompt length is \d+"),
        ("groq", "overflow", r"reduce the length of the messages"),
        ("openrouter", "overflow", r"maximum context length is \d+ tokens"),
        ("copilot", "overflow", r"exceeds the limit of \d+"),
        ("llama-cpp", "overflow", r"exceeds the available context size"),
        ("lm-studio", "overflow", r"greater than the context length"),
        ("minimax", "overflow", r"context window exceeds limit"),
        ("kimi", "overflow", r"exceeded model token limit"),
        ("mistral", "overflow", r"too large for model with \d+ maximum context length"),
        ("context-length-exceeded", "overflow", r"context[_ ]length[_ ]exceeded"),
        ("too-many-tokens", "overflow", r"too many tokens"),
        ("token-limit-exceeded", "overflow", r"token limit exceeded"),
        ("request-too-large", "overflow", r"request_too_large"),
    ),
    not_overflow=(),
    bodyless_overflow=_pattern("python", "no-body", "overflow", _NO_BODY),
    length_overflow=False,
)
"""The seed profile's table (R-5, R-7(a)): the contract's pattern and overflow wordings."""

#: pi 1.6.0's retryable list, in its order (pi-ai dist/utils/retry.js,
#: RETRYABLE_PROVIDER_ERROR_PATTERN); the pi issue each came from is in its comments there.
_PI_1_6_RETRYABLE: tuple[tuple[str, str, str], ...] = (
    ("overloaded", "load", "overloaded"),
    ("server-busy", "load", "server_busy"),
    ("servers-busy", "load", "servers are currently busy"),
    ("high-demand", "load", "currently experiencing high demand"),
    ("at-capacity", "load", "model is at capacity"),
    ("rate-limit", "rate", "rate.?limit"),
    ("too-many-requests", "rate", "too many requests"),
    ("status-code", "status", "(?<![a-z0-9])(?:429|500|502|503|504|520|524)(?![a-z0-9])"),
    ("service-unavailable", "server", "service.?(?:is.?)?(?:temporarily.?)?unavailable"),
    ("server-error", "server", "server.?error"),
    ("internal-error", "server", "internal.?error"),
    ("provider-returned-error", "gateway", "provider.?returned.?(?:an.?)?error"),
    ("request-buffer", "gateway", "exceeded request buffer limit while retrying upstream"),
    ("unable-to-forward", "gateway", "unable to forward upstream"),
    ("upstream-request-failed", "gateway", "upstream.?request.?failed"),
    ("upstream-stream-read-error", "gateway", "upstream_stream_read_error"),
    ("stream-interrupted", "gateway", "stream was interrupted"),
    ("http2-stream-failed", "gateway", "http/?2 stream failed"),
    ("network-error", "transport", "network.?error"),
    ("connection-error", "transport", "connection.?error"),
    ("connection-refused", "transport", "connection.?refused"),
    ("connection-lost", "transport", "connection.?lost"),
    ("connection-closed", "transport", "connection.?closed"),
    ("other-side-closed", "transport", "other side closed"),
    ("fetch-failed", "transport", "fetch failed"),
    ("request-failed", "transport", r"request to \S+ failed, reason:"),
    ("getaddrinfo", "dns", "getaddrinfo"),
    (
        "socket-error-code",
        "transport",
        "(?<![a-z0-9_])(?:ECONNRESET|ECONNABORTED|ECONNREFUSED|ETIMEDOUT|EPIPE)(?![a-z0-9_])",
    ),
    ("connection-reset-by-peer", "transport", "connection reset by peer"),
    ("enotfound", "dns", "ENOTFOUND"),
    ("eai-again", "dns", "EAI_AGAIN"),
    ("upstream-connect", "transport", "upstream.?connect"),
    ("reset-before-headers", "transport", "reset before headers"),
    ("socket-hang-up", "transport", "socket hang up"),
    ("socket-closed", "transport", "socket connection was closed"),
    ("timed-out", "timeout", "timed? out"),
    ("timeout", "timeout", "timeout"),
    ("terminated", "transport", "terminated"),
    ("websocket-closed", "transport", "websocket.?closed"),
    ("websocket-error", "transport", "websocket.?error"),
    ("websocket-limit", "transport", "websocket.?connection.?limit.?reached"),
    ("ended-without", "stream", "ended without"),
    ("ended-before-message-stop", "stream", "stream ended before message_stop"),
    ("ended-before-terminal-event", "stream", "stream ended before a terminal response event"),
    ("http2-no-response", "stream", "http2 request did not get a response"),
    ("stream-disconnected", "stream", "stream disconnected before completion"),
    ("cut-short", "stream", "cut short after the reply had begun"),
    ("pending-stream-canceled", "stream", "pending stream has been canceled"),
    ("retry-delay", "retry-hint", "retry delay"),
    ("you-can-retry", "retry-hint", "you can retry your request"),
    ("try-again", "retry-hint", "try your request again"),
    ("please-retry", "retry-hint", "please retry your request"),
    ("resource-exhausted", "grpc", "ResourceExhausted"),
    ("subscription-usage-unavailable", "subscription", "subscription_sharing_usage_unavailable"),
    ("subscription-user-unavailable", "subscription", "subscription_sharing_user_unavailable"),
)

#: pi 1.6.0's never-retry list, in its order (pi-ai dist/utils/retry.js,
#: NON_RETRYABLE_PROVIDER_LIMIT_ERROR_PATTERN).
_PI_1_6_NEVER_RETRY: tuple[tuple[str, str, str], ...] = (
    ("go-usage-limit", "plan", "GoUsageLimitError"),
    ("free-usage-limit", "plan", "FreeUsageLimitError"),
    ("monthly-usage-limit", "plan", "Monthly usage limit reached"),
    ("available-balance", "plan", "available balance"),
    ("insufficient-quota", "quota", "insufficient_quota"),
    ("out-of-budget", "quota", "out of budget"),
    ("quota-exceeded", "quota", "quota exceeded"),
    ("billing", "billing", "billing"),
    ("subscription-usage-limit", "plan", "subscription_sharing_usage_limit_exceeded"),
    (
        "workplace-usage-limit",
        "plan",
        "subscription_sharing_workplace_individual_usage_limit_exceeded",
    ),
    ("zai-1308", "plan", r'"code"\s*:\s*"?1308(?![0-9])'),
)

#: pi 1.6.0's overflow wordings, in its order (pi-ai dist/utils/overflow.js,
#: OVERFLOW_PATTERNS; ``getOverflowPatterns()`` returns them).
_PI_1_6_OVERFLOW: tuple[tuple[str, str, str], ...] = (
    ("anthropic", "overflow", r"prompt (?:is )?too long"),
    ("zai-cn", "overflow", r"prompt exceeds max length"),
    ("request-too-large", "overflow", r"request_too_large"),
    ("bedrock", "overflow", r"input is too long for requested model"),
    ("openai", "overflow", r"exceeds the context window"),
    (
        "litellm-maximum-context-length",
        "overflow",
        r"exceeds (?:the )?(?:model'?s )?maximum context length"
        r"(?: of [\d,]+ tokens?|\s*\([\d,]+\))",
    ),
    ("litellm-context-window-exceeded", "overflow", r"context window exceeded"),
    ("gemini", "overflow", r"input token count.*exceeds the maximum"),
    ("xai", "overflow", r"maximum prompt length is \d+"),
    ("groq", "overflow", r"reduce the length of the messages"),
    ("openrouter", "overflow", r"maximum context length is \d+ tokens"),
    ("poolside", "overflow", r"exceeds (?:the )?maximum allowed input length of [\d,]+ tokens?"),
    (
        "together",
        "overflow",
        r"input \(\d+ tokens\) is longer than the model'?s context length \(\d+ tokens\)",
    ),
    ("copilot", "overflow", r"exceeds the limit of \d+"),
    ("llama-cpp", "overflow", r"exceeds the available context size"),
    ("lm-studio", "overflow", r"greater than the context length"),
    ("minimax", "overflow", r"context window exceeds limit"),
    ("kimi", "overflow", r"exceeded model token limit"),
    ("mistral", "overflow", r"too large for model with \d+ maximum context length"),
    (
        "ds4",
        "overflow",
        r"prompt has [\d,]+ tokens?, but the configured context size is [\d,]+ tokens?",
    ),
    ("zai-finish-reason", "overflow", r"model_context_window_exceeded"),
    ("ollama", "overflow", r"prompt too long; exceeded (?:max )?context length"),
    ("dashscope", "overflow", r"range of input length should be"),
    ("context-length-exceeded", "overflow", r"context[_ ]length[_ ]exceeded"),
    ("too-many-tokens", "overflow", r"too many tokens"),
    ("token-limit-exceeded", "overflow", r"token limit exceeded"),
    ("status-413", "overflow", r"^(?:[\w -]+ API error \(413\):|413(?:\s|:|$))"),
)

#: pi 1.6.0's overflow veto, in its order (overflow.js, NON_OVERFLOW_PATTERNS).
_PI_1_6_NOT_OVERFLOW: tuple[tuple[str, str, str], ...] = (
    ("bedrock-prefix", "throttling", r"^(Throttling error|Service unavailable):"),
    ("rate-limit", "throttling", r"rate limit"),
    ("too-many-requests", "throttling", r"too many requests"),
)

_PI_1_6_BODYLESS = attrs.evolve(
    _pattern(
        "javascript",
        "cerebras-no-body",
        "overflow",
        r"^4(?:00|13)\s*(?:status code)?\s*\(no body\)",
    ),
    providers=frozenset({"cerebras"}),
)

PI_1_6_PATTERNS = PatternTable(
    name="pi-1.6",
    version="@earendil-works/pi-ai 1.6.0",
    provenance=(
        "retryable: pi-ai dist/utils/retry.js RETRYABLE_PROVIDER_ERROR_PATTERN, as"
        " isRetryableAssistantError tests it. never_retry: the same file's"
        " NON_RETRYABLE_PROVIDER_LIMIT_ERROR_PATTERN, tested first. overflow, not_overflow,"
        " bodyless_overflow (Cerebras only) and length_overflow: pi-ai dist/utils/overflow.js"
        " isContextOverflow (OVERFLOW_PATTERNS, NON_OVERFLOW_PATTERNS,"
        " CEREBRAS_BODYLESS_OVERFLOW_PATTERN, its third case). Combined as pi-coding-agent"
        " dist/core/agent-session.js AgentSession._isRetryableError combines them."
    ),
    dialect="javascript",
    retryable=_js(*_PI_1_6_RETRYABLE),
    never_retry=_js(*_PI_1_6_NEVER_RETRY),
    overflow=_js(*_PI_1_6_OVERFLOW),
    not_overflow=_js(*_PI_1_6_NOT_OVERFLOW),
    bodyless_overflow=_PI_1_6_BODYLESS,
    length_overflow=True,
)
"""The pi-1.6 profile's table (R-58): pi 1.6.0's own lists, pattern for pattern, in its order."""

#: pi 1.6.0's retryable names that strict replaces: its status codes (strict's are stricter
#: about what stands around them, and add 529) and its bare "timeout" (which a parameter
#: named 'timeout' in a 400 also says).
_STRICT_DROPS = frozenset({"status-code", "timeout"})

STRICT_PATTERNS = PatternTable(
    name="strict",
    version="trio_session's own (pi 1.6.0's lists plus the R-8 corpus)",
    provenance=(
        "retryable: PI_1_6_PATTERNS.retryable except its status codes, plus status codes"
        " standing alone with 529 (Anthropic), timeout but not a parameter named 'timeout',"
        " throttling, too many tokens (Bedrock),"
        " bad gateway, gateway timeout, connection reset, server disconnected, temporarily"
        " unavailable, and R-5's usage limit (R-17 rotates the credential). never_retry:"
        " the R-8 corpus's credit, spending and credential errors plus pi 1.6.0's"
        " insufficient_quota and out of budget; not its bare billing or quota exceeded,"
        " which per-minute rate limits also say. overflow: PI_1_6_PATTERNS.overflow."
        " not_overflow: pi 1.6.0's veto plus per-minute and throttling wordings."
    ),
    dialect="javascript",
    retryable=_js(
        *(row for row in _PI_1_6_RETRYABLE if row[0] not in _STRICT_DROPS),
        ("status-code", "status", r"(?<![\w.,\-])(?:429|500|502|503|504|520|524|529)(?![\w\-])"),
        ("timeout", "timeout", r"""(?<!['"`])timeout(?!['"`])"""),
        ("usage-limit", "rate", "usage.?limit"),
        ("too-many-tokens", "rate", "too many tokens"),
        ("throttling", "rate", "throttl"),
        ("bad-gateway", "gateway", "bad gateway"),
        ("gateway-timeout", "gateway", "gateway time-?out"),
        ("connection-reset", "transport", "connection.?reset"),
        ("server-disconnected", "transport", "server disconnected"),
        ("temporarily-unavailable", "server", "temporarily unavailable"),
    ),
    never_retry=_js(
        ("insufficient-quota", "quota", "insufficient_quota"),
        ("out-of-budget", "quota", "out of budget"),
        ("daily-quota", "quota", "quota exceeded.*per day"),
        ("account-closed", "credentials", "account.{0,40}(?:suspended|terminated|deactivated)"),
        ("insufficient-credits", "billing", "insufficient.credits"),
        ("credit-balance", "billing", "credit balance"),
        ("spending-limit", "billing", "spending limit"),
        ("credits-used", "billing", "used all available credits"),
        ("payment-required", "billing", "payment required"),
        ("invalid-api-key", "credentials", "invalid.?api.?key"),
        ("authentication", "credentials", "authentication"),
        ("unauthorized", "credentials", "unauthori[sz]ed"),
        ("permission", "credentials", "permission"),
    ),
    overflow=_js(*_PI_1_6_OVERFLOW),
    not_overflow=_js(
        *_PI_1_6_NOT_OVERFLOW,
        ("per-minute", "throttling", r"per min|per minute|\bTPM\b"),
        ("please-wait", "throttling", "please wait"),
        ("rate-limit-word", "throttling", r"(?<![\w-])rate[ _]?limit(?!-)"),
        ("throttling", "throttling", "throttl"),
    ),
    bodyless_overflow=_pattern("javascript", "no-body", "overflow", _NO_BODY),
    length_overflow=False,
)
"""The strict table (R-8, R-60): pi 1.6.0's wider set with our standalone status codes and
never-retry list, checked against the R-8 corpus."""
