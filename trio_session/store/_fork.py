"""Forking: one branch of a session file copied into a new file (the reference's
``createBranchedSession``).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from ._entries import HistoryError, LabelEntry, SessionHeader, encode_record, iso_time
from ._file_io import file_lines, write_new
from ._history import fresh_id, load_session
from ._session_list import session_file_name


def fork_session(
    source: str | os.PathLike[str],
    leaf_id: str | None,
    *,
    directory: str | os.PathLike[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    clock: Callable[[], float] = time.time,
) -> Path:
    """Copy one branch of a session file into a new file; return its path (blocking).

    The reference's ``createBranchedSession``: the new file holds the entries from
    the root to ``leaf_id`` exactly as they were read (fields this version does not
    model included, unknown entry types too) except the labels, then the labels
    that point into that path, written anew; its header names ``source`` as
    ``parentSession``. An entry whose parent was a label is linked to that label's
    parent. With ``leaf_id``
    ``None`` the new file has no entries (a fork before the first message).

    Args:
        source: the session file to copy from.
        leaf_id: the last entry to copy.
        directory: where the new file goes; the source's directory if omitted.
        cwd: the working directory of the new header; the source's if omitted.
        clock: epoch seconds, for the header timestamp.

    Raises:
        HistoryError: the source cannot be read, ``leaf_id`` is not one of its
            entries, or the new file cannot be written.
    """
    source = Path(source)
    loaded = load_session(source)
    path_entries = loaded.branch(leaf_id) if leaf_id is not None else ()
    if leaf_id is not None and not path_entries:
        msg = f"session file {source} has no entry {leaf_id!r}"
        raise HistoryError(msg, path=source)
    kept = [e for e in path_entries if not isinstance(e, LabelEntry)]
    # Labels leave the path (they are written anew below); an entry whose parent was one is
    # linked to the label's own parent, so the chain holds (pi's createBranchedSession leaves
    # that parentId dangling, and pi then loses everything before it).
    dropped = {e.id: e.parent_id for e in path_entries if isinstance(e, LabelEntry)}
    records = []
    for entry in kept:
        record = loaded.raw[entry.id]
        parent = entry.parent_id
        while parent is not None and parent in dropped:
            parent = dropped[parent]
        records.append(record if parent == entry.parent_id else {**record, "parentId": parent})
    on_path = {e.id for e in kept}
    labels: dict[str, tuple[str, str]] = {}
    for item in loaded.entries:
        if isinstance(item, LabelEntry):
            if item.label:
                labels[item.target_id] = (item.label, item.timestamp)
            else:
                labels.pop(item.target_id, None)
    parent = kept[-1].id if kept else None
    taken = set(on_path)
    for target, (label, stamp) in labels.items():
        if target not in on_path:
            continue
        label_id = fresh_id(taken)
        taken.add(label_id)
        records.append(
            encode_record(
                LabelEntry(
                    id=label_id, parent_id=parent, timestamp=stamp, target_id=target, label=label
                )
            )
        )
        parent = label_id
    header = SessionHeader(
        id=str(uuid.uuid4()),
        timestamp=iso_time(clock()),
        cwd=str(Path(cwd).absolute()) if cwd is not None else loaded.header.cwd,
        parent_session=str(source),
    )
    base = Path(directory) if directory is not None else source.parent
    new_path = base / session_file_name(header)
    write_new(new_path, file_lines(header, records))
    return new_path
