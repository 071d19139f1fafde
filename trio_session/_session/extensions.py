"""Extensions: plug-ins that see every session event (R-44) without slowing the session.

An extension is a Python module with an ``activate(api)`` function. It is found by
path (``--extension FILE``) or by the entry-point group ``trio_session.extensions``:

```python
def activate(api):
    api.on("auto_retry_end", on_retry_end)      # sync or async handler

async def on_retry_end(event):
    if not event.success:
        await notify(f"gave up: {event.final_error}")
```

Handlers get the same event objects that ``subscribe()`` callbacks get — the fields
RPC clients see, in snake_case (``event_to_json`` gives the camelCase form).

How they run: the session hands each event to an ``ExtensionRunner``, which
owns one task in the session's nursery and calls the handlers one at a time, in
event order. Handing over never blocks the session, so a slow extension cannot hold
up ``prompt()`` or ``abort()``. A handler that raises, or that is still running
after ``handler_timeout`` seconds, is stopped and reported as an ``extension_error``
event; the session carries on. The runner lives outside the prompt's cancel scope,
so events emitted during cancellation (``auto_retry_end {finalError: "Retry
cancelled"}``, the last ``agent_end``) still reach every extension. When the
session closes, the runner delivers what is queued, each handler still bounded,
then stops.

A *synchronous* handler that blocks (``time.sleep``) blocks the whole Trio run;
the bound cannot interrupt it. Make slow handlers ``async``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import attrs

from .._core.classes import define, frozen
from .._core.errors import TrioSessionError
from .extension_runner import ExtensionRunner, Handler

if TYPE_CHECKING:
    from .facade import AgentSession

ENTRY_POINT_GROUP = "trio_session.extensions"
Activate = Callable[["ExtensionAPI"], None]


class ExtensionLoadError(TrioSessionError):
    """An extension could not be found, imported or activated."""


@define(eq=False)
class ExtensionAPI:
    """What ``activate(api)`` receives.

    Attributes:
        name: the extension's name.
        session: the session the extension is attached to (for ``abort_retry()``,
            ``messages`` …); set when the session opens.
        path: where the extension came from, the ``extensionPath`` of its
            ``extension_error`` events (its file, else its name).
    """

    name: str
    session: AgentSession | None = None
    path: str = attrs.field(default=attrs.Factory(lambda self: self.name, takes_self=True))
    _handlers: dict[str, list[Handler]] = attrs.field(factory=dict, init=False)

    def on(self, event_type: str, handler: Handler) -> None:
        """Call ``handler(event)`` for every event of ``event_type`` (``"*"``: all).

        Args:
            event_type: an event's ``type`` (``"agent_end"``), or ``"*"`` for every event.
            handler: called with each such event.
        """
        self._handlers.setdefault(event_type, []).append(handler)

    def handlers_for(self, event_type: str) -> list[Handler]:
        """The handlers registered for one event type, then the ``"*"`` ones.

        Args:
            event_type: an event's ``type``.
        """
        return [*self._handlers.get(event_type, ()), *self._handlers.get("*", ())]


@frozen
class Extension:
    """A loaded extension: its name and its ``activate`` function.

    Attributes:
        name: the extension's name.
        activate: called with an ``ExtensionAPI`` when the session opens.
        path: its Python file, when it came from one (the ``extensionPath`` of its
            ``extension_error`` events, as pi's); ``None`` otherwise (the name is used).
    """

    name: str
    activate: Activate
    path: str | None = None

    @classmethod
    def from_module(cls, module: ModuleType, name: str | None = None) -> Extension:
        """Wrap a module that defines ``activate(api)``.

        Args:
            module: the module.
            name: the extension's name; the module's if ``None``.
        """
        activate = getattr(module, "activate", None)
        label = name or module.__name__
        if not callable(activate):
            msg = f"extension {label} has no activate(api) function"
            raise ExtensionLoadError(msg)
        file = getattr(module, "__file__", None)
        return cls(name=label, activate=activate, path=str(file) if file else None)


def load_extension_file(path: str | Path) -> Extension:
    """Import a Python file as an extension.

    Args:
        path: the Python file.

    Raises:
        ExtensionLoadError: the file is missing, fails to import, or has no ``activate``.
    """
    path = Path(path)
    name = f"trio_session_extension_{path.stem}"
    if not path.is_file():
        msg = f"extension file {path} does not exist"
        raise ExtensionLoadError(msg)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        msg = f"extension file {path} is not a Python module"
        raise ExtensionLoadError(msg)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        msg = f"extension file {path} failed to import: {type(exc).__name__}: {exc}"
        raise ExtensionLoadError(msg) from exc
    return attrs.evolve(Extension.from_module(module, name=path.stem), path=str(path.resolve()))


def _may_declare(group: str) -> bool:
    """Whether a distribution on ``sys.path`` may declare entry points in ``group``.

    A look at the ``entry_points.txt`` files of the ``*.dist-info`` / ``*.egg-info``
    directories (and ``*.egg/EGG-INFO``) of every directory on the path, for the
    line ``[group]``: a few milliseconds, where importing ``importlib.metadata`` costs
    tens (it is most of what ``trio-session rpc`` would spend on extensions before
    its first answer). Anything else on the path that exists — a zip file, a path
    entry that is not a directory — answers "may": ``importlib.metadata`` decides.
    """
    needle = f"[{group}]"
    for entry in sys.path:
        base = Path(entry or ".")
        try:
            with os.scandir(base) as listing:
                names = [d.name for d in listing if d.name.endswith(_METADATA_DIRS)]
        except FileNotFoundError:
            continue
        except OSError:
            return True  # a zip archive, or a directory we cannot list
        for name in names:
            meta = base / name / "EGG-INFO" if name.endswith(".egg") else base / name
            try:
                text = (meta / "entry_points.txt").read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            if needle in text:
                return True
    return False


_METADATA_DIRS = (".dist-info", ".egg-info", ".egg")


def load_entry_point_extensions(group: str = ENTRY_POINT_GROUP) -> list[Extension]:
    """Every extension installed under the entry-point ``group``, by name.

    Args:
        group: the entry-point group to load.
    """
    if not _may_declare(group):
        return []
    import importlib.metadata  # only where entry points may be: it costs tens of ms

    extensions = []
    for entry in sorted(importlib.metadata.entry_points(group=group), key=lambda e: e.name):
        try:
            target = entry.load()
        except Exception as exc:
            msg = f"extension entry point {entry.name} ({entry.value}) failed to load: {exc!r}"
            raise ExtensionLoadError(msg) from exc
        if isinstance(target, ModuleType):
            extensions.append(Extension.from_module(target, name=entry.name))
        elif callable(target):
            extensions.append(Extension(name=entry.name, activate=target))
        else:
            msg = f"extension entry point {entry.name} is neither a module nor a function"
            raise ExtensionLoadError(msg)
    return extensions


def activate_extensions(
    extensions: Iterable[Extension], session: AgentSession, runner: ExtensionRunner
) -> None:
    """Call every extension's ``activate(api)``, in order, and attach its API to ``runner``.

    Args:
        extensions: the extensions to activate.
        session: the session they are attached to (``api.session``).
        runner: the session's runner, which delivers the events to them.

    Raises:
        ExtensionLoadError: an ``activate`` raised.
    """
    for extension in extensions:
        api = ExtensionAPI(
            name=extension.name, session=session, path=extension.path or extension.name
        )
        try:
            extension.activate(api)
        except Exception as exc:
            msg = f"extension {extension.name} failed to activate: {type(exc).__name__}: {exc}"
            raise ExtensionLoadError(msg) from exc
        runner.attach(api)
