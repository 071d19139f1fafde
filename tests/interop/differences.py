"""The declared differences between pi and trio-session, read from docs/rpc.md.

The table under ``<!-- rpc-differences -->`` in docs/rpc.md ("Where we differ from pi") is
the only list of what the interop comparison forgives: each row has an id, the pi
versions it applies to, what differs, how the comparison treats it, and why. The
comparison here implements each id's treatment (``RULES``) and applies a row only to the
versions the row names; ``test_the_table_and_the_rules_agree`` fails if the docs name an id
this module does not implement, or the reverse. Backticked names in the "how compared"
column are the keys or steps the rule applies to, so the docs say exactly which.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

DOCS = Path(__file__).resolve().parents[2] / "docs" / "rpc.md"
MARKER = "<!-- rpc-differences -->"
_ROW = re.compile(r"^\|\s*`([a-z0-9-]+)`\s*\|(.*)\|\s*$")
_TICKED = re.compile(r"`([^`]+)`")

#: Every id the comparison knows how to apply. What each does is in ``Declared``.
RULES = frozenset(
    {
        "run-to-run",
        "retry-state",
        "will-retry",
        "compaction-result",
        "http-error-wording",
        "message-update-snapshot",
        "backoff-prompt-timing",
        "retried-after-compaction",
        "get-commands",
        "system-message",
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
_SERVER = re.compile(r"http://127\.0\.0\.1:\d+")
_ERROR_KEYS = frozenset({"errorMessage", "finalError"})
_HTTP_STATUS = re.compile(r"^([1-5]\d\d) ")


class Normalizer:
    """Rewrites one transcript by the declared rules only.

    ``run-to-run``: ids and session files become ``<id:N>`` / ``<session:N>`` numbered by
    first appearance in one transcript (so "the same id as before" still compares equal),
    timestamps and durations ``<timestamp>``, the work dir ``<work>``, the server
    ``<server>``. The other rules are applied where ``Declared`` says.
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
                value = _stream_update(value)
            if self.snapshot and kind == "message_start":
                value = _message_start(value)
            return {k: self(v, k) for k, v in value.items()}
        if isinstance(value, list):
            if self.system:
                value = without_system(value)
            return [self(v) for v in value]
        if not self.run_to_run:
            return value
        if key in _TIME_KEYS and isinstance(value, int | float):
            return f"<{key}>"
        if isinstance(value, str):
            if self.http and key in _ERROR_KEYS and (status := _HTTP_STATUS.match(value)):
                return f"<http error {status.group(1)}>"
            if key in _ID_KEYS and not _REQUEST_ID.match(value):
                return self._placeholder(self.ids, "id", value)
            return self.string(value)
        if isinstance(value, float):
            return round(value, 12)
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


def without_system(items: list[Any]) -> list[Any]:
    """``items`` without pi 1.6.0's system messages (``system-message``): a tree node holding
    one is replaced by its children, and an entry whose parent was one names that entry's
    parent instead."""
    parents = {
        v["id"]: v.get("parentId")
        for v in items
        if isinstance(v, dict) and is_system(v) and isinstance(v.get("id"), str)
    }
    kept: list[Any] = []
    for value in items:
        if not is_system(value):
            if isinstance(value, dict) and value.get("parentId") in parents:
                value = {**value, "parentId": parents[value["parentId"]]}
            kept.append(value)
        elif isinstance(value, dict) and isinstance(value.get("children"), list):
            kept.extend(without_system(value["children"]))
    return kept


def _stream_update(event: dict[str, Any]) -> dict[str, Any]:
    """A ``message_update`` without ``message``, ``partial`` and our top-level ``delta``
    (``message-update-snapshot``)."""
    kept = {k: v for k, v in event.items() if k not in ("message", "delta")}
    inner = kept.get("assistantMessageEvent")
    if isinstance(inner, dict):
        kept["assistantMessageEvent"] = {k: v for k, v in inner.items() if k != "partial"}
    return kept


def _message_start(event: dict[str, Any]) -> dict[str, Any]:
    """An assistant's ``message_start`` without its content (``message-update-snapshot``)."""
    message = event.get("message")
    if not (isinstance(message, dict) and message.get("role") == "assistant"):
        return event
    return {**event, "message": {k: v for k, v in message.items() if k != "content"}}


def strip_extra(value: Any, pi_value: Any, keys: tuple[str, ...]) -> Any:
    """``value`` (ours) without the declared extra ``keys`` that ``pi_value`` lacks."""
    if isinstance(value, dict) and isinstance(pi_value, dict):
        return {k: v for k, v in value.items() if not (k in keys and k not in pi_value)}
    return value


def strip_ours(value: Any, declared: Declared) -> Any:
    """Our extra keys that pi never sends, removed wherever they sit (``will-retry`` on
    ``agent_end``, ``compaction-result`` on a compaction result), before normalizing."""
    if isinstance(value, list):
        return [strip_ours(v, declared) for v in value]
    if not isinstance(value, dict):
        return value
    if value.get("type") == "agent_end":
        value = {k: v for k, v in value.items() if k not in declared.names("will-retry")}
    if "summary" in value and "tokensBefore" in value:
        value = {k: v for k, v in value.items() if k not in declared.names("compaction-result")}
    return {k: strip_ours(v, declared) for k, v in value.items()}
