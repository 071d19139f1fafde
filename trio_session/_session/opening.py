"""``open_session``: make an ``AgentSession``, and abort and close it on leaving the block.

Above the facade: it opens what the session is given (a session file, extensions) and
runs the extensions' task beside the block.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeGuard

import trio

from .._agent.compactors import Compactor
from .._core.groups import unwrapped
from .._retry.classify import Classifier
from .._settings.store import Settings, SettingsStore
from ..providers._base import Model, Provider
from .extension_runner import DEFAULT_HANDLER_TIMEOUT, ExtensionRunner
from .extensions import Extension, activate_extensions, load_extension_file
from .facade import DEFAULT_COMPACTOR as _DEFAULT_COMPACTOR
from .facade import AgentSession

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from .._agent.tools import Tool  # a type only: a session without tools imports no schema code
    from ..store._credentials import CredentialStore
    from ..store._session_file import SessionFile


def _no_report(event: object) -> None:
    """The runner's report until the session takes it over (it points it at its hub)."""


#: ``unwrapped`` keeps no state: one instance serves every block.
_UNWRAPPED = unwrapped()


class _Given:
    """The session file ``open_session`` was given (or ``None``), as the async context
    manager ``open_history`` would be: one small object rather than an exit stack."""

    __slots__ = ("_file",)

    def __init__(self, file: SessionFile | None) -> None:
        self._file = file

    async def __aenter__(self) -> SessionFile | None:
        return self._file

    async def __aexit__(self, *exc_info: object) -> None:
        return None


def open_session(
    provider: Provider,
    model: Model | str | None = None,
    *,
    settings: SettingsStore | Settings | Mapping[str, Any] | None = None,
    tools: Sequence[Tool] = (),
    system_prompt: str | None = None,
    credentials: CredentialStore | None = None,
    compactor: Compactor | None = None,
    classifier: Classifier | None = None,
    session_id: str | None = None,
    extensions: Sequence[Extension | str | Path] = (),
    extension_timeout: float = DEFAULT_HANDLER_TIMEOUT,
    history: str | Path | SessionFile | None = None,
    models: Sequence[Model] = (),
    thinking_level: str | None = None,
    tracer_provider: TracerProvider | None = None,  # -- observe (issue 14) --
    fallback_models: Sequence[Model | str] = (),
) -> AbstractAsyncContextManager[AgentSession]:
    """Open an ``AgentSession``; on exit, abort what runs and close it.

    An exception raised in the block comes out as itself, not wrapped in an
    exception group.

    Args:
        provider: the model provider (``FauxProvider`` in tests).
        model: a ``Model``, a model id (its provider is ``provider.name``), or
            omitted for providers that have a default (the faux provider).
        settings: a ``SettingsStore``, a ``Settings``, nested groups in
            settings-file form (``{"retry": {"maxRetries": 5}}``), or ``None`` for
            the defaults. ``settings_with(SERVICE_SETTINGS, {"retry": {…}})`` is a
            preset with a key changed.
        tools: tools the model may call.
        system_prompt: sent with every request.
        credentials: where API keys come from; also told about usage limits (R-17).
        compactor: shrinks the context on overflow; ``SummarizingCompactor`` if
            omitted.
        classifier: overrides ``retry.classifier`` with any ``Classifier``.
        session_id: identifies the session to the credential store; random if
            omitted (a resumed ``history`` file's own id wins).
        extensions: ``Extension`` objects or paths of extension files; their
            handlers run in a task of this block, each bounded by
            ``extension_timeout`` (see ``trio_session._session.extensions``).
        extension_timeout: seconds one extension handler may run.
        history: a session file (JSON lines) to append every message to: a path —
            resumed if it exists (the context is rebuilt without retried errors),
            written with the first message if not — or an open ``SessionFile``. A
            prompt is on disk before its request goes out, and a run's messages
            before its ``agent_end`` (so before any backoff sleep). A resumed file's
            session id is the session's, and so are the model (if it is among
            ``models``) and the thinking level it last recorded.
        models: the models ``set_model`` / ``cycle_model`` switch between (they all
            use ``provider``).
        thinking_level: the starting thinking level (see ``AgentSession``).
        tracer_provider: the OpenTelemetry ``TracerProvider`` the session's spans go
            to (``trio-session[otel]``); the global one if omitted. See
            ``trio_session._observe.tracing``.
        fallback_models: models (or model ids of ``provider``) to go on with, in
            order, when the retry policy has nothing left to try on the model a prompt
            is on: its retry chain gave up on a retryable error, or (``retry.profile``
            ``"pi-1.6"``) a usage limit found no free key. A ``model_fallback`` event
            says so; the next prompt starts on the session's model again. None by
            default (R-65 … R-67).

    Returns:
        An async context manager; ``async with`` it to get the session.

    Example:
        ```python
        async with open_session(FauxProvider([FauxReply(text="Hi")])) as session:
            reply = await session.prompt("Hello")
        ```
    """
    if not extensions and (history is None or _is_open_file(history)):
        # The common block: a small object, not an async generator (whose frame would
        # hold every argument while the session lives).
        return _SessionBlock(
            provider,
            model,
            {
                "settings": settings,
                "tools": tools,
                "system_prompt": system_prompt,
                "credentials": credentials,
                "compactor": compactor if compactor is not None else _DEFAULT_COMPACTOR,
                "classifier": classifier,
                "session_id": (
                    history.header.id
                    if history is not None
                    else session_id
                    if session_id is not None
                    else uuid.uuid4().hex
                ),
                "history_file": history,
                "models": models,
                "thinking_level": thinking_level,
                "tracer_provider": tracer_provider,  # -- observe --
                "fallback_models": [_session_model(provider, m) for m in fallback_models],
            },
        )
    return _open_session(
        provider,
        model,
        settings=settings,
        tools=tools,
        system_prompt=system_prompt,
        credentials=credentials,
        compactor=compactor,
        classifier=classifier,
        session_id=session_id,
        extensions=extensions,
        extension_timeout=extension_timeout,
        history=history,
        models=models,
        thinking_level=thinking_level,
        tracer_provider=tracer_provider,
        fallback_models=[_session_model(provider, m) for m in fallback_models],
    )


def _is_open_file(history: object) -> TypeGuard[SessionFile]:
    """Whether ``history`` is an open ``SessionFile`` (importing the storage code to ask)."""
    from ..store._session_file import SessionFile

    return isinstance(history, SessionFile)


def _session_model(provider: Provider, model: Model | str | None) -> Model:
    """``open_session``'s ``model``: a ``Model``, an id of ``provider``'s, or its default."""
    if model is None:
        return _default_model(provider.name)
    if isinstance(model, str):
        return Model(id=model, provider=provider.name)
    return model


@functools.lru_cache(maxsize=64)
def _default_model(provider_name: str) -> Model:
    """A provider's default model, one per name (a ``Model`` is frozen: sessions share it)."""
    return Model(id=f"{provider_name}-model", provider=provider_name)


class _SessionBlock:
    """``open_session`` without extensions or a session file to open: the session is
    made on entering the block and closed on leaving it; nothing else is kept."""

    __slots__ = ("_arguments", "_model", "_provider", "_session")

    def __init__(
        self, provider: Provider, model: Model | str | None, arguments: dict[str, Any]
    ) -> None:
        self._provider: Provider | None = provider
        self._model = model
        self._arguments: dict[str, Any] | None = arguments
        self._session: AgentSession | None = None

    async def __aenter__(self) -> AgentSession:
        if self._provider is None or self._arguments is None:
            msg = "an open_session() block can be entered once"
            raise RuntimeError(msg)
        provider, arguments = self._provider, self._arguments
        model = _session_model(provider, self._model)
        self._provider = self._model = self._arguments = None
        self._session = AgentSession(provider=provider, model=model, **arguments)
        return self._session

    async def __aexit__(self, *exc_info: object) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.aclose()


@asynccontextmanager
async def _open_session(
    provider: Provider,
    model: Model | str | None,
    *,
    settings: SettingsStore | Settings | Mapping[str, Any] | None,
    tools: Sequence[Tool],
    system_prompt: str | None,
    credentials: CredentialStore | None,
    compactor: Compactor | None,
    classifier: Classifier | None,
    session_id: str | None,
    extensions: Sequence[Extension | str | Path],
    extension_timeout: float,
    history: str | Path | SessionFile | None,
    models: Sequence[Model],
    thinking_level: str | None,
    tracer_provider: TracerProvider | None,
    fallback_models: Sequence[Model],
) -> AsyncIterator[AgentSession]:
    """``open_session`` with extensions to run, or a session file to open."""
    loaded = [e if isinstance(e, Extension) else load_extension_file(e) for e in extensions]
    model = _session_model(provider, model)
    opened: AbstractAsyncContextManager[SessionFile | None] = _Given(None)
    if history is not None:  # a file: the storage code is imported now, not before
        from ..store._open_history import open_history
        from ..store._session_file import SessionFile

        if isinstance(history, SessionFile):
            opened = _Given(history)
        else:
            opened = open_history(history, session_id=session_id)
    async with opened as history_file:
        if history_file is not None:
            session_id = history_file.header.id
        runner = None
        if loaded:
            runner = ExtensionRunner(report=_no_report, handler_timeout=extension_timeout)
        session = AgentSession(
            provider=provider,
            model=model,
            settings=settings,
            tools=tools,
            system_prompt=system_prompt,
            credentials=credentials,
            compactor=compactor if compactor is not None else _DEFAULT_COMPACTOR,
            classifier=classifier,
            session_id=session_id if session_id is not None else uuid.uuid4().hex,
            extensions=runner,
            history_file=history_file,
            models=models,
            thinking_level=thinking_level,
            tracer_provider=tracer_provider,  # -- observe --
            fallback_models=fallback_models,
        )
        if runner is None:
            try:
                yield session
            finally:
                await session.aclose()
            return
        with _UNWRAPPED:
            async with trio.open_nursery() as nursery:
                activate_extensions(loaded, session, runner)
                await nursery.start(runner.run)
                try:
                    yield session
                finally:
                    await session.aclose()
                    runner.close()
