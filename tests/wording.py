"""What this interpreter says, for tests that quote it.

Python's own wording changes between versions: 3.13 says "Illegal trailing comma before
end of object" where 3.11 said "Expecting property name enclosed in double quotes", one
column earlier, and renamed ``HTTPStatus(413)`` "Content Too Large". Our messages pass
such text through, so a test that quotes it asks the running interpreter what it is.
"""

from __future__ import annotations

import json
from http import HTTPStatus


def json_error(text: str) -> str:
    """``json``'s complaint about ``text``, quoted as ours are: ``"MSG at line L column C"``."""
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    raise AssertionError(f"{text!r} is valid JSON")


def reason(status: int) -> str:
    """The reason phrase Python's ``http.server`` sends with ``status``."""
    return HTTPStatus(status).phrase
