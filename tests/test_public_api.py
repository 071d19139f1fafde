"""The package has one public face: ``trio_session.__all__``."""

from __future__ import annotations

import inspect

import attrs

import trio_session


def test_all_is_sorted_and_unique() -> None:
    """__all__ is sorted (constants first, as ruff sorts it) and has no duplicates."""
    names = trio_session.__all__
    assert len(set(names)) == len(names)
    assert names == sorted(names, key=lambda n: (not n.isupper(), n[0].islower(), n))


def test_all_is_complete() -> None:
    """Every public name the package defines is exported, and every export exists."""
    defined = {
        name
        for name, value in vars(trio_session).items()
        if not name.startswith("_") and not inspect.ismodule(value) and name not in {"annotations"}
    }
    assert defined == set(trio_session.__all__)


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
