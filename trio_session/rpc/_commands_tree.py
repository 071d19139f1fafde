"""The RPC commands of the session tree: entries, tree, switch, fork, clone, name.

Pure: one frozen class each, and ``DECLARED``, each class with the fields it reads,
from which ``_protocol`` builds the parse table.
"""

from __future__ import annotations

from typing import Final, Literal

from .._core.classes import frozen
from ._fields import ENTRY_ID, NAME, SESSION_PATH, SINCE, Field
from ._wire import CommandId


@frozen
class GetEntries:
    """``{"type": "get_entries", "since"?: entryId}`` — ``{"entries": […], "leafId"}``.

    The session file's entries in append order (no header), only those after ``since``
    when given (pi 1.6.0).
    """

    since: str | None = None
    id: CommandId | None = None
    type: Literal["get_entries"] = "get_entries"


@frozen
class GetTree:
    """``{"type": "get_tree"}`` — ``{"tree": [node, …], "leafId"}`` (pi 1.6.0).

    A node is ``{"entry", "children", "label"?, "labelTimestamp"?}``.
    """

    id: CommandId | None = None
    type: Literal["get_tree"] = "get_tree"


@frozen
class SwitchSession:
    """``{"type": "switch_session", "sessionPath": str}`` — abort, then resume that file.

    Attributes:
        session_path: the session file to resume.
        id: the request id, echoed in the response; ``None`` for none.
        type: always ``"switch_session"``; the command's name on the wire.
    """

    session_path: str
    id: CommandId | None = None
    type: Literal["switch_session"] = "switch_session"


@frozen
class Fork:
    """``{"type": "fork", "entryId": str}`` — a new session: the branch before that user message.

    Answered ``{"text": <the message's text>, "cancelled": false}``.

    Attributes:
        entry_id: the id of the user message entry to fork before (see ``get_fork_messages``).
        id: the request id, echoed in the response; ``None`` for none.
        type: always ``"fork"``; the command's name on the wire.
    """

    entry_id: str
    id: CommandId | None = None
    type: Literal["fork"] = "fork"


@frozen
class Clone:
    """``{"type": "clone"}`` — a new session holding the whole current branch.

    Attributes:
        id: the request id, echoed in the response; ``None`` for none.
        type: always ``"clone"``; the command's name on the wire.
    """

    id: CommandId | None = None
    type: Literal["clone"] = "clone"


@frozen
class GetForkMessages:
    """``{"type": "get_fork_messages"}`` — ``{"messages": [{"entryId", "text"}, …]}``.

    Attributes:
        id: the request id, echoed in the response; ``None`` for none.
        type: always ``"get_fork_messages"``; the command's name on the wire.
    """

    id: CommandId | None = None
    type: Literal["get_fork_messages"] = "get_fork_messages"


@frozen
class SetSessionName:
    """``{"type": "set_session_name", "name": str}`` — the display name (not empty).

    Attributes:
        name: the new display name.
        id: the request id, echoed in the response; ``None`` for none.
        type: always ``"set_session_name"``; the command's name on the wire.
    """

    name: str
    id: CommandId | None = None
    type: Literal["set_session_name"] = "set_session_name"


#: Each command class of this module, with the fields it reads.
DECLARED: Final[tuple[tuple[type, tuple[Field, ...]], ...]] = (
    (GetEntries, (SINCE,)),
    (GetTree, ()),
    (SwitchSession, (SESSION_PATH,)),
    (Fork, (ENTRY_ID,)),
    (Clone, ()),
    (GetForkMessages, ()),
    (SetSessionName, (NAME,)),
)
