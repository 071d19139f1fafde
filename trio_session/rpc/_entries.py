"""``get_entries`` and ``get_tree``: a session file's entries as pi 1.6.0 answers them.

Both read the file as written (``LoadedSession.raw``: every entry's JSON object as the
file holds it, fields this version does not model included), so what a client sees
is what pi's ``SessionManager`` would give it for the same file.
"""

from __future__ import annotations

from typing import Any

from ..store._entries import LabelEntry
from ..store._loaded import LoadedSession


def entries_json(
    loaded: LoadedSession, leaf_id: str | None, since: str | None = None
) -> dict[str, Any] | str:
    """``{"entries": [...], "leafId": ...}``: every entry in append order, the header left
    out; only those after ``since`` when it is given. The error text if ``since`` names
    no entry.

    Args:
        loaded: the session file, as read.
        leaf_id: the session's current position (``leafId``).
        since: an entry id: only the entries after it are returned.
    """
    entries = loaded.entries
    if since is not None:
        index = next((i for i, e in enumerate(entries) if e.id == since), None)
        if index is None:
            return f"Entry not found: {since}"
        entries = entries[index + 1 :]
    return {"entries": [loaded.raw[e.id] for e in entries], "leafId": leaf_id}


def tree_json(loaded: LoadedSession, leaf_id: str | None) -> dict[str, Any]:
    """``{"tree": [node, ...], "leafId": ...}``, a node being ``{"entry", "children",
    "label"?, "labelTimestamp"?}``, as pi's ``getTree``.

    Roots are the entries without a parent (or their own parent) and orphans whose
    parent is missing; children are in timestamp order (ties in file order); a
    ``label`` entry names its target's label, and a later empty one clears it.

    Args:
        loaded: the session file, as read.
        leaf_id: the session's current position (``leafId``).
    """
    labels: dict[str, tuple[str, str]] = {}
    for entry in loaded.entries:
        if isinstance(entry, LabelEntry):
            if entry.label:
                labels[entry.target_id] = (entry.label, entry.timestamp)
            else:
                labels.pop(entry.target_id, None)
    nodes: dict[str, dict[str, Any]] = {}
    for entry in loaded.entries:
        node: dict[str, Any] = {"entry": loaded.raw[entry.id], "children": []}
        if entry.id in labels:
            node["label"], node["labelTimestamp"] = labels[entry.id]
        nodes[entry.id] = node
    roots: list[dict[str, Any]] = []
    for entry in loaded.entries:
        parent = None if entry.parent_id in (None, entry.id) else nodes.get(entry.parent_id)
        (roots if parent is None else parent["children"]).append(nodes[entry.id])
    stack = list(roots)
    while stack:  # not recursive: a long session is a deep tree
        node = stack.pop()
        node["children"].sort(key=_timestamp)
        stack.extend(node["children"])
    return {"tree": roots, "leafId": leaf_id}


def _timestamp(node: dict[str, Any]) -> str:
    """An entry's ISO timestamp (``2025-06-01T09:30:00.123Z``), which sorts as the time."""
    value = node["entry"].get("timestamp")
    return value if isinstance(value, str) else ""
