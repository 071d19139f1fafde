"""What the ``trio-session`` subcommands do, given plain values (``trio_session.cli`` parses argv).

Every function here turns user mistakes into a ``CommandError`` with a message
meant for a person; the command line prints it and exits 2. Nothing here prints a traceback.
"""

from __future__ import annotations

import datetime
import importlib
import ipaddress
import os
import re
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from ._core.errors import SettingsError, TrioSessionError
from ._dirs import make_private_dirs
from ._files import check_regular
from ._pi.config import BUILT_IN_PROVIDERS, SUPPORTED_APIS, AgentDirConfig
from ._settings.store import Settings, SettingsLayer, SettingsStore, default_settings_paths
from .providers._base import Model, Provider
from .providers._error_text import excerpt
from .providers._httpx import load_httpx
from .providers._models import PROVIDER_APIS, builtin_model
from .store._entries import MAX_SESSION_FILE_BYTES
from .store._session_list import default_sessions_dir, find_latest

# The HTTP adapters (and httpx), the faux provider and the SQLite credential store are
# imported where a command needs them: ``rpc --faux`` loads no HTTP client, and a key
# given in full (``--api-key-file``, pi's auth.json) opens no SQLite database.
if TYPE_CHECKING:
    from .providers._http import HttpProvider

#: ``--provider`` names of our own → the environment variables holding their key, in
#: the order they are looked at (``GOOGLE_API_KEY`` is Google's other name for it).
KEY_VARIABLES: Mapping[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
}
DEFAULT_MODELS = {
    "openai": "gpt-4.1-mini",
    "anthropic": "claude-sonnet-4-5",
    "gemini": "gemini-2.5-flash",
}
#: The adapter of each wire API trio_session speaks: its module and class.
ADAPTERS: Mapping[str, tuple[str, str]] = {
    "openai-completions": ("trio_session.providers._openai", "OpenAIProvider"),
    "anthropic-messages": ("trio_session.providers._anthropic", "AnthropicProvider"),
    "google-generative-ai": ("trio_session.providers._gemini", "GeminiProvider"),
}
#: ``retry.provider.timeoutMs``'s default, in seconds (``providers._http``'s
#: ``DEFAULT_ATTEMPT_TIMEOUT``, which is not imported for it).
DEFAULT_ATTEMPT_TIMEOUT = 600.0


class CommandError(Exception):
    """A user mistake or an unusable environment, said plainly."""


def user_path(text: str, what: str) -> Path:
    """A path the user wrote (a flag's value, a setting), ``~`` and ``~user`` expanded.

    Args:
        text: the path as written.
        what: where it was written, for the error (``--session-dir``, ``sessionDir``).

    Raises:
        CommandError: ``"--session-dir 'a\\x00b': a path cannot contain a NUL character"``;
            ``"--session-dir ~nosuchuser/x: cannot expand ~nosuchuser: no such user"``.
    """
    if "\0" in text:
        raise CommandError(f"{what} {text!r}: a path cannot contain a NUL character")
    try:
        return Path(text).expanduser()
    except RuntimeError:  # pathlib's "Could not determine home directory."
        head = text.split("/", 1)[0]
        why = "no home directory ($HOME is not set)" if head == "~" else "no such user"
        raise CommandError(f"{what} {text}: cannot expand {head}: {why}") from None


# -- settings ----------------------------------------------------------------------------


def load_settings(
    extra: Sequence[str | Path],
    *,
    defaults: bool = True,
    ignore_broken: bool = False,
    warn: Callable[[str], None] = lambda text: print(text, file=sys.stderr),
    agent_dir: AgentDirConfig | None = None,
) -> SettingsStore:
    """Global file < project file < each ``extra`` file, in order (R-38).

    The global and project files are ours (``default_settings_paths``) or, with
    ``agent_dir``, pi's (``DIR/settings.json``, ``<cwd>/.pi/settings.json``); the
    global one is where ``set_and_persist`` writes a key no file sets. Without
    ``defaults`` (the demo) only the ``extra`` files are read, and nothing is written.

    A broken file is a ``CommandError`` naming file, key and value — or, with
    ``ignore_broken``, a warning, and the session starts with the other layers.
    Keys kept but not used (unknown, moot) are warnings.
    """
    own: tuple[Path, ...] = ()
    if defaults:
        own = agent_dir.settings_paths if agent_dir is not None else default_settings_paths()
    paths = [*own, *map(Path, extra)]
    layers = []
    for index, path in enumerate(paths):
        try:
            layer = SettingsLayer.from_file(path, pi=agent_dir is not None and index < len(own))
        except SettingsError as exc:
            if not ignore_broken:
                hint = "; to start without this file, add --ignore-broken-settings"
                raise CommandError(f"{exc}{hint}") from exc
            warn(f"trio-session: warning: ignoring {path}: {exc}")
            continue
        layers.append(layer)
        for text in layer.warnings:
            warn(f"trio-session: warning: {text}")
    return SettingsStore(layers, global_path=own[0] if own else None)


# -- choosing the model ------------------------------------------------------------------------


def select_model(
    *,
    provider: str | None,
    model_id: str | None,
    settings: Settings,
    agent_dir: AgentDirConfig | None = None,
) -> Model:
    """The model of ``--provider``/``--model``, else of ``defaultProvider``/``defaultModel``.

    ``--model PROVIDER/ID`` names both, as in pi. Without a model id, the provider's
    default model is ours (``DEFAULT_MODELS``) or its first in models.json. With
    ``agent_dir`` the model comes from models.json (custom providers and models) or a
    built-in provider of pi's; ``openai``, ``anthropic`` and ``gemini`` are always
    known. A model of the built-in table (``builtin_model``) carries its context
    window and prices, so ``usage.cost`` is filled in.

    Raises:
        CommandError: an unknown provider or model, or one with no default model.
    """
    if provider is None and agent_dir is not None and model_id is not None:
        prefix, slash, rest = model_id.partition("/")
        if slash and (prefix in BUILT_IN_PROVIDERS or agent_dir.provider_models(prefix)):
            provider, model_id = prefix, rest
    name = provider or settings.default_provider or "openai"
    if model_id is None and (provider is None or provider == settings.default_provider):
        model_id = settings.default_model
    if agent_dir is None:
        if name not in KEY_VARIABLES:
            raise CommandError(
                f"unknown provider {name!r}; choose openai, anthropic, gemini or faux "
                "(or a provider of pi's models.json, with --agent-dir)"
            )
        return known_model(name, model_id or DEFAULT_MODELS[name])
    customs = agent_dir.provider_models(name)
    if model_id is None:
        if name in DEFAULT_MODELS:
            model_id = DEFAULT_MODELS[name]
        elif customs:
            model_id = customs[0].id
        else:
            raise CommandError(f"no default model for provider {name!r}; name one with --model")
    model = agent_dir.find_model(name, model_id)
    if model is None and not customs and name in KEY_VARIABLES:
        return known_model(name, model_id)  # ours, not pi's: gemini
    if model is None:
        if customs:
            listed = ", ".join(m.id for m in customs)
            msg = f"provider {name!r} has no model {model_id!r} in {agent_dir.models_path} "
            raise CommandError(msg + f"(its models: {listed})")
        raise CommandError(
            f"unknown provider {name!r}: neither one of pi's built-in providers nor "
            f"defined in {agent_dir.models_path}"
        )
    return model


def known_model(provider: str, model_id: str) -> Model:
    """``provider``/``model_id`` from the built-in table, else a plain ``Model`` of the
    provider's API (a 128k context window and no prices)."""
    known = builtin_model(provider, model_id)
    if known is not None:
        return known
    return Model(id=model_id, provider=provider, api=PROVIDER_APIS.get(provider, ""))


# -- providers ----------------------------------------------------------------------------

#: Seconds to connect to the provider, for every provider the CLI builds.
CONNECT_TIMEOUT = 10.0
#: ``retry.provider.timeoutMs`` and ``retry.provider.idleTimeoutMs`` defaults, in seconds.
DEFAULT_IDLE_TIMEOUT = 120.0


def provider_timeouts(*, attempt_timeout: float, idle_timeout: float) -> dict[str, Any]:
    """The timeout keywords an HTTP provider is built with.

    ``timeout``: ``idle_timeout`` for every phase of a request but connecting — so the
    longest silence while an answer streams — and ``CONNECT_TIMEOUT`` to connect.
    ``attempt_timeout``: the deadline of one whole attempt. The timeout is httpx's tuple
    ``(connect, read, write, pool)``: the provider makes it an ``httpx.Timeout`` (and
    imports httpx) when it first sends.
    """
    return {
        "timeout": (CONNECT_TIMEOUT, idle_timeout, idle_timeout, idle_timeout),
        "attempt_timeout": attempt_timeout,
    }


@asynccontextmanager
async def open_provider(
    kind: str | None,
    *,
    model_id: str | None = None,
    base_url: str | None = None,
    context_window: int | None = None,
    faux_script: str | Path | None = None,
    attempt_timeout: float = DEFAULT_ATTEMPT_TIMEOUT,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    model: Model | None = None,
    agent_dir: AgentDirConfig | None = None,
    max_connections: int | None = None,
) -> AsyncIterator[tuple[Provider, Model]]:
    """The provider and model a command talks to; HTTP clients are closed on exit.

    ``model`` is what ``select_model`` chose (else ``kind``/``model_id`` are used);
    its ``api`` picks the adapter (``ADAPTERS``). The endpoint is ``base_url``
    (``--base-url``), else the model's own (models.json), else the adapter's
    environment variable (``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``,
    ``GEMINI_BASE_URL``), else the provider's default; see ``endpoint``.
    ``attempt_timeout`` (``--timeout``) and ``idle_timeout``
    (``--idle-timeout``) are seconds; see ``provider_timeouts``. ``max_connections``
    (``http.maxConnections``) sizes the HTTP provider's pool (its ``limits``). The faux
    provider has no use for them.
    """
    if kind == "faux":
        from .providers._faux import FauxProvider, load_faux_script

        if faux_script is None:
            raise CommandError("--provider faux needs --faux SCRIPT.json")
        try:
            provider: Provider = FauxProvider(load_faux_script(faux_script))
        except TrioSessionError as exc:
            raise CommandError(str(exc)) from exc
        yield (
            provider,
            Model(
                id=model_id or "faux-model",
                provider="faux",
                context_window=context_window or 128_000,
            ),
        )
        return
    if model is None:
        model = select_model(
            provider=kind, model_id=model_id, settings=Settings(), agent_dir=agent_dir
        )
    cls = provider_class(model)
    timeouts = provider_timeouts(attempt_timeout=attempt_timeout, idle_timeout=idle_timeout)
    headers = agent_dir.headers(model.provider, model.id) if agent_dir is not None else {}
    url, _ = endpoint(model, base_url)
    http = cls(
        base_url=url, name=model.provider, headers=headers, limits=max_connections, **timeouts
    )
    async with http:
        yield (
            http,
            attrs.evolve(
                model,
                base_url=http.base_url,
                context_window=context_window or model.context_window,
            ),
        )


def provider_class(model: Model) -> type[HttpProvider]:
    """The adapter that speaks ``model.api`` (a built-in provider's, if the model has none).

    Raises:
        CommandError: an API trio_session does not speak, named.
    """
    built_in = BUILT_IN_PROVIDERS.get(model.provider)
    api = model.api or (
        built_in.api if built_in is not None else PROVIDER_APIS.get(model.provider, "")
    )
    adapter = ADAPTERS.get(api)
    if adapter is not None:
        module, name = adapter
        cls: type[HttpProvider] = getattr(importlib.import_module(module), name)
        return cls
    speaks = ", ".join(SUPPORTED_APIS[:-1]) + f" and {SUPPORTED_APIS[-1]}"
    raise CommandError(
        f"model {model.provider}/{model.id} uses the api {api or 'none'!r}, which "
        f"trio-session does not speak (it speaks {speaks})"
    )


def endpoint(model: Model, base_url: str | None = None) -> tuple[str, str]:
    """The base URL a command sends ``model``'s requests to, and where it came from.

    ``base_url`` (``--base-url``) first; then the model's own, unless it is the
    adapter's default endpoint (a built-in provider of pi's says it, and the
    environment may move it); then the adapter's ``BASE_URL_VARIABLE``; then
    its default. The second item names the source for messages: ``"--base-url"``,
    ``"the model's baseUrl"``, the variable's name, or ``"default"``.
    """
    cls = provider_class(model)
    default = cls.DEFAULT_BASE_URL.rstrip("/")
    if base_url:
        return base_url, "--base-url"
    if model.base_url and model.base_url.rstrip("/") != default:
        return model.base_url, "the model's baseUrl"
    from .providers._http import env_base_url

    from_env = env_base_url(cls)
    if from_env is not None and cls.BASE_URL_VARIABLE:
        return from_env, cls.BASE_URL_VARIABLE
    return default, "default"


#: A URL httpx surely parses as an absolute http(s) URL with a host: a lowercase scheme,
#: an ASCII host of lowercase letters, digits, dots and hyphens, a port of digits, a
#: path of unreserved characters. (httpx checks a dotted-quad host as an IPv4 address,
#: so ``_url_problem`` does too.) Anything else is parsed by httpx itself.
_PLAIN_HTTP_URL = re.compile(r"https?://([a-z0-9.-]+)(?::([0-9]{1,5}))?(?:/[A-Za-z0-9._~/-]*)?")
_DOTTED_QUAD = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+")


def _url_problem(url: str) -> str | None:
    """Why ``url`` cannot be an API root, or ``None`` if it can (as httpx parses it).

    A plain URL (``_PLAIN_HTTP_URL``) is accepted without importing httpx; every other
    one is parsed by httpx, as the request will be.
    """
    plain = _PLAIN_HTTP_URL.fullmatch(url) if isinstance(url, str) else None
    if plain is not None and len(url) <= MAX_PLAIN_URL:
        host, port = plain.groups()
        if (not _DOTTED_QUAD.fullmatch(host) or _is_ipv4(host)) and int(port or 0) <= MAX_PORT:
            return None
    load_httpx()  # only a command that talks HTTP pays for it
    import httpx

    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError):
        return "is not a URL"
    if parsed.scheme not in ("http", "https"):
        return "is not an absolute http:// or https:// URL"
    if not parsed.host:
        return "has no host"
    if parsed.port is not None and parsed.port > MAX_PORT:
        return f"has port {parsed.port}, past the last one ({MAX_PORT})"
    return None


#: The highest TCP port; httpx takes a larger one and fails only when it connects.
MAX_PORT = 65535


#: httpx refuses a URL longer than this.
MAX_PLAIN_URL = 65536


def _is_ipv4(host: str) -> bool:
    try:
        ipaddress.IPv4Address(host)
    except ValueError:
        return False
    return True


def key_variables(provider: str) -> tuple[str, ...]:
    """The environment variables that may hold ``provider``'s key (ours, else pi's)."""
    built_in = BUILT_IN_PROVIDERS.get(provider)
    return KEY_VARIABLES.get(provider) or (built_in.key_variables if built_in else ())


def env_api_key(provider: str, environ: Mapping[str, str] = os.environ) -> tuple[str, str] | None:
    """``(variable, key)`` of the first of ``key_variables(provider)`` that is set."""
    for variable in key_variables(provider):
        value = environ.get(variable, "").strip()
        if value:
            return variable, value
    return None


def preflight(
    model: Model,
    *,
    base_url: str | None,
    api_key: str | None,
    agent_dir: AgentDirConfig | None = None,
    environ: Mapping[str, str] = os.environ,
    stored: Callable[[str], bool] | None = None,
    check_key: bool = True,
) -> None:
    """Check, before any session opens, what would otherwise fail at the first prompt.

    The endpoint (``endpoint``) must be an absolute http(s) URL with a host. With
    ``check_key``, a missing key stops it too (``missing_key``); ``chat`` and ``rpc``
    leave that to the prompt that needs one, as pi does.

    Raises:
        CommandError: one line saying what is wrong and how to fix it; never a key.
    """
    url, source = endpoint(model, base_url)
    problem = _url_problem(url)
    if problem is not None:
        shown = excerpt(url, 120)
        where = f"{source} {shown!r}" if source == "--base-url" else f"{source}={shown!r}"
        if source == "the model's baseUrl":
            where = f"the baseUrl {shown!r} of {model.provider}/{model.id}"
        raise CommandError(
            f"{where} {problem}; give the API root, like https://api.example.com/v1 "
            "or http://127.0.0.1:8080/v1"
        )
    if check_key:
        ways = missing_key(
            model,
            base_url=base_url,
            api_key=api_key,
            agent_dir=agent_dir,
            environ=environ,
            stored=stored,
        )
        if ways is not None:
            raise CommandError(f"no API key for {model.provider}: {ways}")


def missing_key(
    model: Model,
    *,
    base_url: str | None,
    api_key: str | None,
    agent_dir: AgentDirConfig | None = None,
    environ: Mapping[str, str] = os.environ,
    stored: Callable[[str], bool] | None = None,
) -> str | None:
    """How to give ``model``'s provider a key, if it needs one and has none; else ``None``.

    A key is needed when the requests go to a provider's own service (its default
    endpoint, or the one pi knows for it): from ``--api-key``/``--api-key-file`` (or
    pi's auth.json, already in ``api_key``), the provider's environment variable, or
    the credential store (``stored(provider)``, by default: the SQLite store has a key
    for it). A custom endpoint — ``--base-url``, ``OPENAI_BASE_URL``, a models.json
    ``baseUrl`` — may run without a key (a local server), so none is demanded there.

    Returns:
        ``"set OPENAI_API_KEY, run 'trio-session auth add openai' or pass --api-key-file
        PATH"`` (never a key), or ``None``.
    """
    url, _ = endpoint(model, base_url)
    built_in = BUILT_IN_PROVIDERS.get(model.provider)
    official = {provider_class(model).DEFAULT_BASE_URL.rstrip("/")}
    if built_in is not None and built_in.base_url:
        official.add(built_in.base_url.rstrip("/"))
    if url.rstrip("/") not in official or api_key:
        return None
    if env_api_key(model.provider, environ) is not None:
        return None
    if (stored or _has_stored_key)(model.provider):
        return None
    ways = [f"set {' or '.join(key_variables(model.provider)) or 'its key variable'}"]
    ways.append(f"run 'trio-session auth add {model.provider}'")
    ways.append("pass --api-key-file PATH")
    if agent_dir is not None:
        ways.append(f"add it to {agent_dir.auth_path}")
    return f"{', '.join(ways[:-1])} or {ways[-1]}"


def _has_stored_key(provider: str) -> bool:
    from .store._sqlite_credentials import SqliteCredentialStore

    try:
        with SqliteCredentialStore.open(env_vars={}) as store:
            return any(info.source == "store" for info in store.list(provider))
    except TrioSessionError:
        return False


# -- history ---------------------------------------------------------------------------------


def sessions_dir(settings: SettingsStore, agent_dir: Path | None = None) -> Path:
    """Where new sessions of the cwd go, as pi decides it: the settings' ``sessionDir``
    (``~`` expanded, relative to the cwd); else, with pi's agent directory,
    ``DIR/sessions/--<cwd>--``; else our own sessions directory for the cwd."""
    configured = settings.current.session_dir
    if configured:
        return Path.cwd() / user_path(configured, "sessionDir")
    if agent_dir is not None:
        return default_sessions_dir(Path.cwd(), data_dir=agent_dir)
    return default_sessions_dir(Path.cwd())


def history_path(
    *,
    resume: str | None,
    continue_latest: bool,
    save: bool,
    directory: Path | None = None,
    flag: str = "--continue",
) -> Path | None:
    """The session file for ``--resume PATH`` / ``--continue`` / a new one (or none).

    ``directory`` is where sessions of the cwd are kept (``sessions_dir``); by default
    our own sessions directory for the cwd. ``flag`` names the latest-session flag given
    (``--resume`` without a file asks for it too) in the error when there is none.
    The latest session is the newest that holds a conversation (``find_latest``): one
    another process has open for writing is passed by, with a warning, for an older one.
    """
    if resume is not None:
        path = Path(resume)
        try:
            found = check_regular(path, MAX_SESSION_FILE_BYTES)
        except OSError as exc:  # a pipe, /dev/zero, a directory, a loop of links, too large
            raise CommandError(f"--resume: cannot use {path}: {exc.strerror or exc}") from None
        if not found:
            raise CommandError(f"--resume: no session file at {path}")
        return path
    directory = directory if directory is not None else default_sessions_dir(Path.cwd())
    if continue_latest:
        latest = find_latest(directory)
        if latest.path is None:
            raise CommandError(f"{flag}: no earlier session in {directory}")
        for passed in latest.open_elsewhere:
            print(
                f"trio-session: warning: {flag}: {passed} is open in another process; "
                f"continuing {latest.path}",
                file=sys.stderr,
            )
        return latest.path
    if not save:
        return None
    try:
        make_private_dirs(directory)
    except OSError as exc:
        msg = f"cannot create session directory {directory}: {exc.strerror or exc}"
        raise CommandError(msg) from None
    return directory / f"{timestamp()}_{uuid.uuid4().hex[:8]}.jsonl"


def timestamp() -> str:
    """A filesystem-safe UTC timestamp for new session file names."""
    now = datetime.datetime.now(datetime.UTC)
    return now.strftime("%Y-%m-%dT%H-%M-%S-") + f"{now.microsecond // 1000:03d}Z"
