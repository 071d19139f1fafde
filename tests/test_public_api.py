"""The package has one public face: ``trio_session.__all__``."""

from __future__ import annotations

import ast
import inspect
import sys
from pathlib import Path

import attrs
import pytest

import trio_session


def test_all_is_sorted_and_unique() -> None:
    """__all__ is sorted (constants first, as ruff sorts it) and has no duplicates."""
    names = trio_session.__all__
    assert len(set(names)) == len(names)
    assert names == sorted(names, key=lambda n: (not n.isupper(), n[0].islower(), n))


def test_all_is_complete() -> None:
    """Every public name is in ``__all__``, and every name of ``__all__`` resolves.

    The names are imported on first use (PEP 562), so ``vars(trio_session)`` holds
    only those used so far: completeness is checked on the table of where each one
    lives, and on ``dir()``, which lists them all whether imported or not.
    """
    exports = trio_session._EXPORTS
    assert set(exports) == set(trio_session.__all__)
    assert set(trio_session.__all__) <= set(dir(trio_session))
    for name in trio_session.__all__:
        value = getattr(trio_session, name)
        module = sys.modules[f"trio_session{exports[name]}"]
        assert value is getattr(module, name), name
    # Now that all are imported, the module defines nothing public beyond them.
    defined = {
        name
        for name, value in vars(trio_session).items()
        if not name.startswith("_")
        and not inspect.ismodule(value)
        and name not in {"annotations", "TYPE_CHECKING", "Any"}
    }
    assert defined == set(trio_session.__all__)


def test_type_checkers_see_every_export() -> None:
    """The ``if TYPE_CHECKING:`` imports (what mypy and the docs read) are the table."""
    tree = ast.parse(Path(trio_session.__file__).read_text(encoding="utf-8"))
    guarded = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    )
    seen = {
        alias.asname or alias.name: "." * node.level + (node.module or "")
        for node in guarded.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert seen == trio_session._EXPORTS


def test_an_unknown_name_is_an_attribute_error() -> None:
    """A name that is not public raises ``AttributeError`` (so ``hasattr`` works)."""
    assert not hasattr(trio_session, "no_such_name")
    with pytest.raises(AttributeError, match="no_such_name"):
        getattr(trio_session, "no_such_name")  # noqa: B009


def test_exports_are_documented() -> None:
    """Every exported class and function has a docstring."""
    undocumented = [
        name
        for name in trio_session.__all__
        if (inspect.isclass(obj := getattr(trio_session, name)) or inspect.isfunction(obj))
        and not inspect.getdoc(obj)
    ]
    assert undocumented == []


def test_agent_session_surface_is_deliberate() -> None:
    """The retry chain's hooks are not public methods of ``AgentSession`` (they live on a
    private adapter), and every public method and property has a docstring."""
    public = {n for n in dir(trio_session.AgentSession) if not n.startswith("_")}
    hooks = {"emit", "reattempt", "rotate_credential", "retry_settings", "next_step"}
    assert public & (hooks | {"drop_from_context"}) == set()
    fields = set(attrs.fields_dict(trio_session.AgentSession))  # in the class docstring
    undocumented = sorted(
        n for n in public - fields if not inspect.getdoc(getattr(trio_session.AgentSession, n))
    )
    assert undocumented == []
