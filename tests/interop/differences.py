"""The declared differences between pi and trio-session, read from docs/rpc.md, and the
step-by-step comparison that forgives exactly those.

The table under ``<!-- rpc-differences -->`` in docs/rpc.md ("Where we differ from pi") is
the only list of what the interop comparison forgives: each row has an id, the pi
versions it applies to, what differs, how the comparison treats it, and why. This module
implements each id's treatment (``RULES``) and applies a row only to the versions the row
names. Backticked names in the "how compared" column are the keys or steps the rule
applies to, so the docs say exactly which.

Both interop tests (pi 0.73.1's and pi 1.6.0's RpcClient) compare through ``compare``, and
both check the table against the run: ``unused_rows`` names a declared row that forgave
nothing in the run (the comparison without it is no further from pi anywhere), so a row
that a fix made unnecessary fails a test until it is deleted or narrowed to the versions
it still applies to.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import attrs

from tests.interop.conftest import Agent

DOCS = Path(__file__).resolve().parents[2] / "docs" / "rpc.md"
MARKER = "<!-- rpc-differences -->"
_ROW = re.compile(r"^\|\s*`([a-z0-9-]+)`\s*\|(.*)\|\s*$")
_TICKED = re.compile(r"`([^`]+)`")

#: Every id the comparison knows how to apply. What each does is in the docs' table.
RULES = frozenset(
    {
        "run-to-run",
        "retry-state",
        "will-retry",
        "compaction-result",
        "compaction-estimate",
        "http-error-wording",
        "message-update-snapshot",
        "message-update-delta",
        "pi16-protocol",
        "backoff-prompt-timing",
        "backoff-steer-order",
        "retried-after-compaction",
        "get-commands",
        "system-message",
        "system-message-count",
        "pi16-message-shape",
        "pi16-message-fields",
        "model-switch-thinking",
        "backoff-prompt-joins",
    }
)


@attrs.frozen
class Row:
    """One declared difference: its id, the pi versions it applies to, what differs,
    how the comparison treats it, why, and the backticked names of its fourth column."""

    id: str
    versions: frozenset[str]
    what: str
    compared: str
    why: str
    names: tuple[str, ...]


def read_table(text: str | None = None) -> dict[str, Row]:
    """The rows of the differences table, by id (in the docs' order)."""
    text = DOCS.read_text() if text is None else text
    _, found, rest = text.partition(MARKER)
    assert found, f"{DOCS}: no {MARKER} marker"
    rows: dict[str, Row] = {}
    for line in rest.strip().splitlines():
        if not line.startswith("|"):
            break
        match = _ROW.match(line)
        if match is None:
            continue  # the header and its rule
        cells = [cell.strip() for cell in match.group(2).split("|")]
        assert len(cells) == 4, line
        versions, what, compared, why = cells
        assert match.group(1) not in rows, f"{match.group(1)} twice in the table"
        rows[match.group(1)] = Row(
            match.group(1),
            frozenset(v.strip() for v in versions.split(",")),
            what,
            compared,
            why,
            tuple(_TICKED.findall(compared)),
        )
    return rows


@attrs.frozen
class Declared:
    """The rows that apply to one pi version, as the comparison uses them."""

    version: str
    rows: Mapping[str, Row]

    @classmethod
    def for_version(cls, version: str) -> Declared:
        """The table's rows naming ``version``."""
        rows = {k: r for k, r in read_table().items() if version in r.versions}
        return cls(version, rows)

    def without(self, rule: str) -> Declared:
        """These rows but ``rule`` (to see what the comparison would say without it)."""
        return Declared(self.version, {k: r for k, r in self.rows.items() if k != rule})

    def has(self, rule: str) -> bool:
        """Whether the docs declare ``rule`` for this version."""
        assert rule in RULES, rule
        return rule in self.rows

    def names(self, rule: str) -> tuple[str, ...]:
        """The backticked names of ``rule``'s row (empty if the row is not declared)."""
        assert rule in RULES, rule
        row = self.rows.get(rule)
        return row.names if row else ()


# -- normalization ---------------------------------------------------------------------------

_ID_KEYS = frozenset(
    {
        "id",
        "entryId",
        "firstKeptEntryId",
        "parentId",
        "sessionId",
        "parentSession",
        "leafId",
        "targetId",
        "fromId",
    }
)
_TIME_KEYS = frozenset({"timestamp", "durationMs", "duration"})
_REQUEST_ID = re.compile(r"^req_\d+$")
_ISO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
_SERVER = re.compile(r"http://127\.0\.0\.1:\d+")
_ERROR_KEYS = frozenset({"errorMessage", "finalError"})
_HTTP_STATUS = re.compile(r"^([1-5]\d\d)\b")


class Normalizer:
    """Rewrites one transcript by the declared rules only.

    ``run-to-run``: ids and session files become ``<id:N>`` / ``<session:N>`` numbered by
    first appearance in one transcript (so "the same id as before" still compares equal),
    timestamps (numbers, or a session entry's ISO 8601 string) and durations
    ``<timestamp>``, the work dir ``<work>``, the server ``<server>``. The other rules are
    applied where ``Declared`` says.
    """

    def __init__(self, work: str, declared: Declared) -> None:
        self.work = work
        self.declared = declared
        self.ids: dict[str, str] = {}
        self.sessions: dict[str, str] = {}
        self.run_to_run = declared.has("run-to-run")
        self.snapshot = declared.has("message-update-snapshot")
        self.http = declared.has("http-error-wording")
        self.system = declared.has("system-message")
        self.system_ids: dict[str, str | None] = {}
        self.session_ids: dict[str, str] = {}
        self.shape16 = declared.has("pi16-message-shape")

    def register_system_ids(self, value: Any) -> None:
        """Note the ids of pi 1.6.0's system entries and their parents
        (``system-message``): such an id is compared as its parent's, so the ids around
        them are numbered as ours are."""
        if isinstance(value, dict):
            if is_system(value) and isinstance(value.get("id"), str):
                self.system_ids[value["id"]] = value.get("parentId")
            for item in value.values():
                self.register_system_ids(item)
        elif isinstance(value, list):
            for item in value:
                self.register_system_ids(item)

    def _not_system(self, value: str) -> str | None:
        seen = set()
        current: str | None = value
        while current is not None and current in self.system_ids and current not in seen:
            seen.add(current)
            current = self.system_ids[current]
        return current

    def _placeholder(self, table: dict[str, str], kind: str, value: str) -> str:
        if value not in table:
            table[value] = f"<{kind}:{len(table) + 1}>"
        return table[value]

    def string(self, text: str) -> str:
        """A string with the work dir, the server's port and session files replaced."""
        if not self.run_to_run:
            return text
        text = _SERVER.sub("<server>", text)
        if self.work in text:
            text = text.replace(self.work, "<work>")
            if text.startswith("<work>/agent/sessions/") and text.endswith(".jsonl"):
                return self._placeholder(self.sessions, "session", text)
        return text

    def __call__(self, value: Any, key: str | None = None) -> Any:
        if isinstance(value, dict):
            kind = value.get("type")
            if self.snapshot and kind == "message_update":
                value = _without_content(value)
            if self.snapshot and kind == "message_start":
                value = _message_start(value)
            if self.shape16:
                value = shape16(value)
            return {k: self(v, k) for k, v in value.items()}
        if isinstance(value, list):
            if self.system:
                value = without_system(value)
            return [self(v) for v in value]
        if not self.run_to_run:
            return value
        if key in _TIME_KEYS and (
            isinstance(value, int | float) or (isinstance(value, str) and _ISO_TIME.match(value))
        ):
            return f"<{key}>"  # a number, or a session entry's ISO 8601 string
        if isinstance(value, str):
            if self.http and key in _ERROR_KEYS and (status := _HTTP_STATUS.match(value)):
                return f"<http error {status.group(1)}>"
            if key in _ID_KEYS and not _REQUEST_ID.match(value):
                if key == "sessionId":  # numbered apart: entries before do not shift it
                    return self._placeholder(self.session_ids, "session-id", value)
                if value in self.system_ids:
                    parent = self._not_system(value)
                    return None if parent is None else self._placeholder(self.ids, "id", parent)
                return self._placeholder(self.ids, "id", value)
            return self.string(value)
        return value


def is_system(value: Any) -> bool:
    """pi 1.6.0's system prompt as a message, an event carrying one, or an entry holding
    one (``system-message``)."""
    if not isinstance(value, dict):
        return False
    if value.get("role") == "system":
        return True
    message = value.get("message")
    if isinstance(message, dict) and message.get("role") == "system":
        return True
    entry = value.get("entry")
    return isinstance(entry, dict) and is_system(entry)


def without_system(items: list[Any], above: Mapping[str, Any] | None = None) -> list[Any]:
    """``items`` without pi 1.6.0's system messages (``system-message``): a tree node holding
    one is replaced by its children, and an entry whose parent was one names that entry's
    parent instead."""
    parents = {
        **(above or {}),
        **{
            v["id"]: v.get("parentId")
            for v in items
            if isinstance(v, dict) and is_system(v) and isinstance(v.get("id"), str)
        },
    }
    kept: list[Any] = []
    for value in items:
        if not is_system(value):
            if isinstance(value, dict) and value.get("parentId") in parents:
                value = {**value, "parentId": parents[value["parentId"]]}
            kept.append(value)
        elif isinstance(value, dict) and isinstance(value.get("children"), list):
            kept.extend(without_system(value["children"], parents))
    return kept


def shape16(value: dict[str, Any]) -> dict[str, Any]:
    """One streaming event as both agents' are compared (``pi16-message-shape``): an
    assistant ``message_start`` without its ``stopReason`` (pi 1.6.0's ``"pending"``); a
    ``message_update`` as ``{type, assistantMessageEvent}`` without ``partial`` (pi
    1.6.0's ``usage`` and 0.73.1's ``message`` left out). Applied to both sides."""
    kind = value.get("type")
    if kind == "message_start":
        message = value.get("message")
        if isinstance(message, dict) and message.get("role") == "assistant":
            message = {k: v for k, v in message.items() if k != "stopReason"}
            return {**value, "message": message}
    if kind == "message_update":
        kept = {k: v for k, v in value.items() if k not in ("usage", "message")}
        inner = kept.get("assistantMessageEvent")
        if isinstance(inner, dict):
            kept["assistantMessageEvent"] = {k: v for k, v in inner.items() if k != "partial"}
        return kept
    return value


def _no_content(message: Any) -> Any:
    if not isinstance(message, dict):
        return message
    return {k: v for k, v in message.items() if k != "content"}


def _without_content(event: dict[str, Any]) -> dict[str, Any]:
    """A ``message_update`` whose ``message`` and ``partial`` lack their content
    (``message-update-snapshot``)."""
    kept = dict(event)
    if "message" in kept:
        kept["message"] = _no_content(kept["message"])
    inner = kept.get("assistantMessageEvent")
    if isinstance(inner, dict) and "partial" in inner:
        kept["assistantMessageEvent"] = {**inner, "partial": _no_content(inner["partial"])}
    return kept


def _message_start(event: dict[str, Any]) -> dict[str, Any]:
    """An assistant's ``message_start`` without its content (``message-update-snapshot``)."""
    message = event.get("message")
    if not (isinstance(message, dict) and message.get("role") == "assistant"):
        return event
    return {**event, "message": _no_content(message)}


def strip_extra(value: Any, pi_value: Any, keys: tuple[str, ...]) -> Any:
    """``value`` (ours) without the declared extra ``keys`` that ``pi_value`` lacks."""
    if isinstance(value, dict) and isinstance(pi_value, dict):
        return {k: v for k, v in value.items() if not (k in keys and k not in pi_value)}
    return value


#: The commands whose answer carries pi 1.6.0's ``data.disposition`` (``pi16-protocol``).
_DISPOSED = frozenset({"prompt", "steer", "follow_up"})


def strip_ours(value: Any, declared: Declared) -> Any:
    """Our extra keys that pi never sends, removed wherever they sit (``will-retry`` on
    ``agent_end``, ``message-update-delta`` on ``message_update``, ``compaction-result`` on
    a compaction result), and pi 1.6.0's additions an older pi lacks (``pi16-protocol``:
    its events, a prompt's ``disposition``; ``pi16-message-fields``: an assistant
    message's, its usage's and its cost's new keys), before normalizing."""
    additions = declared.names("pi16-protocol")
    if isinstance(value, list):
        return [
            strip_ours(v, declared)
            for v in value
            if not (isinstance(v, dict) and v.get("type") in additions)
        ]
    if not isinstance(value, dict):
        return value
    if value.get("type") == "response" and value.get("command") in _DISPOSED:
        data = value.get("data")
        if isinstance(data, dict) and set(data) <= set(additions):
            value = {k: v for k, v in value.items() if k != "data"}
    drop: tuple[str, ...] = ()
    if value.get("role") == "assistant" or "totalTokens" in value or "totalFromProvider" in value:
        drop = declared.names("pi16-message-fields")  # a message, its usage, its cost
    elif value.get("type") == "agent_end":
        drop = declared.names("will-retry")
    elif value.get("type") == "message_update":
        drop = declared.names("message-update-delta")
    elif "summary" in value and "tokensBefore" in value:
        drop = declared.names("compaction-result")
    return {k: strip_ours(v, declared) for k, v in value.items() if k not in drop}


# -- the step-by-step comparison -------------------------------------------------------------


@attrs.frozen
class Scenario:
    """What a driver runs: its steps in order, and the commands its idle waits send.

    ``polling`` maps such a command to the client method that sends it: its responses
    count only in the steps of that method (``run-to-run``: how often the driver asks
    while it waits is timing).
    """

    steps: tuple[str, ...]
    polling: Mapping[str, str]


def _outcome(step: Mapping[str, Any], scenario: Scenario, declared: Declared) -> dict[str, Any]:
    """The step's outcome: returned value or thrown message, and its own responses
    without request ids."""
    responses = [
        {k: v for k, v in response.items() if k != "id"}
        for response in step["responses"]
        if scenario.polling.get(response.get("command"), step["method"]) == step["method"]
    ]
    kept = {"outcome": step["outcome"], "responses": responses}
    if step["outcome"] == "returned":
        kept["value"] = step["value"]
    else:
        kept["error"] = step["error"]
    return kept


def _normalized(
    agent: Agent, transcript: Mapping[str, Any], scenario: Scenario, declared: Declared
) -> dict[str, dict[str, Any]]:
    normalize = Normalizer(transcript["work"], declared)
    if normalize.system:
        normalize.register_system_ids(transcript["steps"])
    steps = {}
    for step in transcript["steps"]:
        outcome, events = _outcome(step, scenario, declared), step["events"]
        if agent == "trio-session":
            outcome, events = strip_ours(outcome, declared), strip_ours(events, declared)
        outcome, events = estimates(outcome, declared), estimates(events, declared)
        steps[step["step"]] = {"outcome": normalize(outcome), "events": normalize(events)}
    return steps


def estimates(value: Any, declared: Declared) -> Any:
    """A compaction result's token estimates (``compaction-estimate``'s keys) as a
    placeholder, in both runs: pi 1.6.0 counts its own system prompt in them."""
    keys = declared.names("compaction-estimate")
    if not keys:
        return value
    if isinstance(value, list):
        return [estimates(v, declared) for v in value]
    if not isinstance(value, dict):
        return value
    result = "summary" in value and "tokensBefore" in value
    return {
        k: "<estimate>" if result and k in keys else estimates(v, declared)
        for k, v in value.items()
    }


def _result_pair(step: str, pi: Any, ours: Any, declared: Declared) -> tuple[Any, Any]:
    keys = declared.names("retry-state")
    if step.split(".")[0] == "getState" and "value" in pi and "value" in ours:
        ours = {**ours, "value": strip_extra(ours["value"], pi["value"], keys)}
        ours["responses"] = [
            {**r, "data": strip_extra(r.get("data"), p.get("data"), keys)} if "data" in r else r
            for r, p in zip(ours["responses"], pi["responses"] + [{}] * 99, strict=False)
        ]
    if step in declared.names("system-message-count"):
        pi = _less_one_message(pi)
    if step in declared.names("get-commands") and "value" in pi:
        pi = {**pi, "value": [c for c in pi["value"] if c.get("source") != "extension"]}
        pi["responses"] = [
            {**r, "data": {"commands": pi["value"]}} if "data" in r else r for r in pi["responses"]
        ]
    return pi, ours


_COUNT_KEYS = ("messageCount", "totalMessages")


def _less_one_message(value: Any) -> Any:
    """``value`` with every ``messageCount`` / ``totalMessages`` one less: pi 1.6.0's
    context's system message not counted (``system-message-count``)."""
    if isinstance(value, dict):
        return {
            k: v - 1 if k in _COUNT_KEYS and isinstance(v, int) else _less_one_message(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_less_one_message(v) for v in value]
    return value


def span_of(step: str, declared: Declared, steps: Iterable[str]) -> tuple[str, ...]:
    """The steps whose events are compared together with ``step``
    (``backoff-prompt-timing``)."""
    span = tuple(s for s in declared.names("backoff-prompt-timing") if s in steps)
    return span if step in span else (step,)


def _events_pair(
    step: str,
    pi_steps: Mapping[str, Any],
    our_steps: Mapping[str, Any],
    declared: Declared,
    scenario: Scenario,
) -> tuple[Any, Any]:
    span = span_of(step, declared, scenario.steps)
    pi: Any = [e for s in span for e in pi_steps[s]["events"]]
    ours: Any = [e for s in span for e in our_steps[s]["events"]]
    switched = declared.names("model-switch-thinking")
    if step in switched:
        ours = [e for e in ours if e.get("type") not in switched]
    if len(span) > 1 and declared.has("backoff-steer-order"):

        def split(events: list[Any]) -> dict[str, list[Any]]:
            queued = [e for e in events if e.get("type") == "queue_update"]
            others = [e for e in events if e.get("type") != "queue_update"]
            return {"queue_update": queued, "others": others}

        pi, ours = split(pi), split(ours)
    return pi, ours


def compare(
    transcripts: Mapping[Agent, Mapping[str, Any]], declared: Declared, scenario: Scenario
) -> dict[str, tuple[Any, Any]]:
    """What is compared, step by step: ``{"result:STEP" | "events:STEP": (pi, ours)}``,
    each after the declared rules (and only those) were applied."""
    pi = _normalized("pi", transcripts["pi"], scenario, declared)
    ours = _normalized("trio-session", transcripts["trio-session"], scenario, declared)
    pairs: dict[str, tuple[Any, Any]] = {}
    for step in scenario.steps:
        pairs[f"result:{step}"] = _result_pair(
            step, pi[step]["outcome"], ours[step]["outcome"], declared
        )
        pairs[f"events:{step}"] = _events_pair(step, pi, ours, declared, scenario)
    return pairs


#: The rows that forgive nothing but expect their steps to differ.
_EXPECTATIONS = frozenset({"retried-after-compaction", "backoff-prompt-joins"})

#: The rows about where the two processes' timing puts an event: needed in a run where
#: the timings differ, not in one where they happen to agree (under load they do, now and
#: then), so a run that needs none of them does not make them unused.
_TIMING = frozenset({"backoff-prompt-timing"})


def expected_to_differ(declared: Declared) -> tuple[str, ...]:
    """The ``result:STEP`` / ``events:STEP`` keys that ``backoff-prompt-joins`` expects to
    differ from pi's (each must)."""
    return tuple(n for n in declared.names("backoff-prompt-joins") if ":" in n)


def mismatches(pi: Any, ours: Any) -> int:
    """How many places ``ours`` differs from ``pi`` in: a key one side lacks, a list item
    one side lacks, a value that differs (each counts one)."""
    if isinstance(pi, dict) and isinstance(ours, dict):
        return sum(mismatches(pi[k], ours[k]) if k in pi and k in ours else 1 for k in {*pi, *ours})
    if isinstance(pi, list) and isinstance(ours, list):
        return sum(map(mismatches, pi, ours)) + abs(len(pi) - len(ours))
    return 0 if pi == ours else 1


def unused_rows(
    transcripts: Mapping[Agent, Mapping[str, Any]], declared: Declared, scenario: Scenario
) -> list[str]:
    """The declared rows that forgave nothing in this run: without the row, no step's
    result or events would be further from pi's (``retried-after-compaction``, which
    forgives nothing but expects its steps to differ: none of them did). A timing row
    (``_TIMING``) is not asked to: whether it forgives anything is the run's timing."""
    pairs = compare(transcripts, declared, scenario)
    full = {k: mismatches(*pair) for k, pair in pairs.items()}
    unused = []
    if declared.has("retried-after-compaction"):
        expected = [f"result:{s}" for s in declared.names("retried-after-compaction")]
        if not any(full.get(key) for key in expected):
            unused.append("retried-after-compaction")
    joined = expected_to_differ(declared)
    if declared.has("backoff-prompt-joins") and not all(full.get(key) for key in joined):
        unused.append("backoff-prompt-joins")
    for rule in [r for r in declared.rows if r not in _EXPECTATIONS | _TIMING]:
        without = compare(transcripts, declared.without(rule), scenario)
        if not any(mismatches(*pair) > full[key] for key, pair in without.items()):
            unused.append(rule)
    return unused
