"""From parsed flags to what ``chat`` and ``rpc`` open: provider, key, session file.

Everything here runs once, before a session opens, and says what is wrong in one line
(``CommandError``): the model (``--model PROVIDER/ID:LEVEL``), the key's source, the
session file of pi's session flags (``session_start``), the system prompt.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path

from .._command_keys import api_key_flag_warning, read_api_key_file
from .._commands import (
    KEY_VARIABLES,
    CommandError,
    history_path,
    missing_key,
    open_provider,
    preflight,
    select_model,
    sessions_dir,
    user_path,
)
from .._core.classes import frozen
from .._pi.config import (
    AGENT_DIR_VARIABLE,
    AgentDirConfig,
    agent_dir_from,
    available_models,
    load_agent_dir,
)
from .._pi.prompt_input import PromptInput
from .._session.extensions import Extension, load_entry_point_extensions, load_extension_file
from .._settings.store import SettingsStore
from ..providers._base import Model, Provider
from ._args import THINKING_CHOICES

#: pi's first line when a prompt's provider has no key (its ``formatNoApiKeyFoundMessage``).
NO_API_KEY = "No API key found for {provider}."


#: The flags whose values are paths: ``(dest, flag)``. A list (``--settings``) is each.
PATH_FLAGS = (
    ("agent_dir", "--agent-dir"),
    ("api_key_file", "--api-key-file"),
    ("faux", "--faux"),
    ("settings", "--settings"),
    ("extension", "--extension"),
    ("resume", "--resume"),
    ("session_dir", "--session-dir"),
)
#: ``FILE|ID`` flags: a path when the value looks like one (``_looks_like_path``).
SESSION_FLAGS = (("session", "--session"), ("fork", "--fork"))


def check_path_flags(args: argparse.Namespace) -> None:
    """Refuse, before anything is read, a path flag that is no path: a NUL in it, or a
    ``~user`` with no such user (``user_path``); the flags a command lacks are skipped.

    Raises:
        CommandError: naming the flag and its value.
    """
    for dest, flag in PATH_FLAGS:
        value = getattr(args, dest, None)
        for text in value if isinstance(value, list) else [value]:
            if isinstance(text, str) and text:
                user_path(text, flag)
    for dest, flag in SESSION_FLAGS:
        text = getattr(args, dest, None)
        if isinstance(text, str) and _looks_like_path(text):
            user_path(text, flag)


def provider_inputs(args: argparse.Namespace, settings: SettingsStore) -> None:
    """Resolve the model, the key and the timeouts of ``chat``/``rpc`` into ``args``, once.

    A flag wins over the settings; a timeout flag left out takes its setting. The key
    of ``--api-key-file`` is read here, so ``-`` takes its line of stdin before the
    chat or the RPC server reads any. Then the pre-flight (``preflight``): a malformed
    base URL stops the command here (exit 2), before any session opens. A missing key
    does not: as in pi, the prompt that needs one is refused (``key_check``).
    """
    args.model_choice = None
    args.agent_dir_key = None
    args.thinking_level = _thinking(args)
    if args.faux is not None or args.provider == "faux":
        provider = "faux"
    else:
        if args.provider is None and args.model and args.agent_dir_config is None:
            prefix, slash, rest = args.model.partition("/")  # pi's --model PROVIDER/ID
            if slash and prefix in KEY_VARIABLES:
                args.provider, args.model = prefix, rest
        args.model_choice = select_model(
            provider=args.provider,
            model_id=args.model,
            settings=settings.current,
            agent_dir=args.agent_dir_config,
        )
        provider = args.model_choice.provider
    if args.api_key is not None:
        print(api_key_flag_warning(provider), file=sys.stderr)
    elif args.api_key_file is not None:
        args.api_key = read_api_key_file(args.api_key_file)
    elif args.agent_dir_config is not None and provider != "faux":
        args.api_key = args.agent_dir_config.api_key(provider)
        args.agent_dir_key = args.api_key  # one key more than the stored ones
    if args.model_choice is not None:
        preflight(
            args.model_choice,
            base_url=args.base_url,
            api_key=args.api_key,
            agent_dir=args.agent_dir_config,
            check_key=False,
        )
    # A flag goes into the store above every file: the session hands the store's
    # timeouts to the provider with every request, so the flag must be what it holds.
    for flag, key in (("timeout", "timeoutMs"), ("idle_timeout", "idleTimeoutMs")):
        if getattr(args, flag) is not None:
            settings.set(f"retry.provider.{key}", round(getattr(args, flag) * 1000))
    timeouts = settings.current.retry.provider
    args.timeout = timeouts.timeout_ms / 1000
    args.idle_timeout = timeouts.idle_timeout_ms / 1000
    args.max_connections = settings.current.http.max_connections
    args.system_prompt = _system_prompt(args.system_prompt)
    if args.name is not None:
        args.name = " ".join(args.name.split())
        if not args.name:
            raise CommandError("--name requires a non-empty value")


def _thinking(args: argparse.Namespace) -> str | None:
    """``--thinking``, else the ``:LEVEL`` suffix of ``--model`` (taken off it), else None.

    pi's ``max`` is our ``xhigh``, the highest level; the session clamps a level to
    what the model can do.
    """
    level: str | None = None
    if args.model and ":" in args.model:
        head, _, tail = args.model.rpartition(":")
        if tail in THINKING_CHOICES and head:
            args.model, level = head, tail
    if args.thinking is not None:
        level = args.thinking
    return "xhigh" if level == "max" else level


def _system_prompt(value: str | None) -> str | None:
    """``--system-prompt TEXT|FILE``: a path to an existing file gives its contents."""
    if value is None:
        return None
    try:
        path = Path(value).expanduser()
    except RuntimeError:  # "~nosuchuser/…": no such file, so the text itself
        return value
    try:
        if path.is_file():
            return path.read_text(encoding="utf-8")
    except (OSError, ValueError) as exc:  # unreadable, or not UTF-8
        raise CommandError(f"--system-prompt {value}: cannot read it ({exc})") from exc
    return value


def key_check(args: argparse.Namespace) -> Callable[[Model], str | None]:
    """What refuses a prompt whose provider has no key, in pi's words (``PromptInput``).

    Asked at every prompt that starts a run, so a key stored meanwhile
    (``trio-session auth add``) counts; ``--api-key``/``--api-key-file`` and pi's
    auth.json count for the provider they were given for.
    """
    config: AgentDirConfig | None = args.agent_dir_config
    first = args.model_choice.provider if args.model_choice is not None else None

    def check(model: Model) -> str | None:
        if model.provider == "faux":
            return None
        key = args.api_key if model.provider == first else None
        if key is None and config is not None:
            key = config.api_key(model.provider)
        base_url = args.base_url if model.provider == first else None
        ways = missing_key(model, base_url=base_url, api_key=key, agent_dir=config)
        if ways is None:
            return None
        return f"{NO_API_KEY.format(provider=model.provider)}\n\nTo give one: {ways}."

    return check


def open_model(args: argparse.Namespace) -> AbstractAsyncContextManager[tuple[Provider, Model]]:
    """The provider of ``--provider`` (``faux`` whenever ``--faux`` is given)."""
    return open_provider(
        "faux" if args.faux is not None else args.provider,
        model_id=args.model,
        base_url=args.base_url,
        context_window=args.context_window,
        faux_script=args.faux,
        attempt_timeout=args.timeout,
        idle_timeout=args.idle_timeout,
        model=args.model_choice,
        agent_dir=args.agent_dir_config,
        max_connections=getattr(args, "max_connections", None),
    )


def extensions(paths: Sequence[str]) -> list[Extension]:
    """``--extension FILE`` files, then the installed entry-point extensions."""
    return [*(load_extension_file(p) for p in paths), *load_entry_point_extensions()]


def credentials_url(args: argparse.Namespace, settings: SettingsStore) -> str | None:
    """``--credentials``, else the settings' ``credentials.url``."""
    url: str | None = args.credentials or settings.current.credentials.url
    return url


def models(args: argparse.Namespace, model: Model) -> tuple[Model, ...]:
    """The models ``set_model`` / ``cycle_model`` move between: the agent dir's, if any."""
    config: AgentDirConfig | None = args.agent_dir_config
    return available_models(config, model) if config is not None else ()


def agent_dir(flag: str | None) -> AgentDirConfig | None:
    """pi's agent directory of ``--agent-dir`` or ``$PI_CODING_AGENT_DIR``, its warnings said."""
    raw = flag if flag is not None else os.environ.get(AGENT_DIR_VARIABLE, "")
    if raw:  # its ~ expanded as agent_dir_from does, or a one-line error
        user_path(raw, "--agent-dir" if flag is not None else f"${AGENT_DIR_VARIABLE}")
    path = agent_dir_from(flag)
    if path is None:
        return None
    if path.exists() and not path.is_dir():
        raise CommandError(f"--agent-dir {path}: not a directory")
    config = load_agent_dir(path, cwd=Path.cwd())
    for warning in config.warnings:
        print(f"trio-session: warning: {warning}", file=sys.stderr)
    return config


@frozen
class SessionStart:
    """Where a ``chat``/``rpc`` session is kept, from pi's session flags.

    Attributes:
        path: the session file to open first (resumed if it exists); ``None`` keeps the
            first session in memory (``--no-session``) or, with ``directory``, starts a
            new file there.
        directory: where new session files go (``/new``, ``new_session``); ``None``
            with ``--no-session``.
    """

    path: Path | None
    directory: Path | None


def session_start(
    args: argparse.Namespace, settings: SettingsStore, *, create_new: bool
) -> SessionStart:
    """The session file of ``--session``, ``--fork``, ``--resume``, ``--continue``, or a new one.

    pi's precedence: ``--no-session`` (in memory), ``--fork`` (which refuses the other
    four), ``--session``, ``--resume``, ``--continue``, else a new session — named
    here with ``create_new`` (the chat), else left to the caller (``rpc`` opens one in
    ``directory``).

    Raises:
        CommandError: no session matches, or ``--fork`` came with another.
    """
    from ..store._fork import fork_session

    config: AgentDirConfig | None = args.agent_dir_config
    directory = (
        Path(args.session_dir).expanduser()
        if args.session_dir
        else sessions_dir(settings, config.path if config is not None else None)
    )
    if args.fork is not None:
        others = [
            flag
            for flag, given in (
                ("--session", args.session is not None),
                ("--continue", args.continue_),
                ("--resume", args.resume is not None),
                ("--no-session", args.no_session),
            )
            if given
        ]
        if others:
            raise CommandError(f"--fork cannot be combined with {', '.join(others)}")
        source = _find_session(args.fork, directory)
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        from ..store._history import load_session

        leaf = load_session(source).leaf_id
        forked = fork_session(source, leaf, directory=directory, cwd=Path.cwd())
        return SessionStart(forked, directory)
    if args.no_session:
        return SessionStart(None, None)
    if args.session is not None:
        return SessionStart(_session_path(args.session, directory), directory)
    if args.resume:
        path = history_path(resume=args.resume, continue_latest=False, save=True)
        return SessionStart(path, directory)
    if args.resume is not None or args.continue_:
        flag = "--continue" if args.continue_ else "--resume"  # for its error: the one given
        path = history_path(
            resume=None, continue_latest=True, save=True, directory=directory, flag=flag
        )
        return SessionStart(path, directory)
    if create_new:
        path = history_path(resume=None, continue_latest=False, save=True, directory=directory)
        return SessionStart(path, directory)
    return SessionStart(None, directory)


def _looks_like_path(arg: str) -> bool:
    """pi's test: a ``/`` or ``\\``, or the ``.jsonl`` ending, makes it a path, not an id."""
    return "/" in arg or "\\" in arg or arg.endswith(".jsonl")


def _session_path(arg: str, directory: Path) -> Path:
    """``--session``'s file: a path as it is (written with the first prompt if missing),
    else an id's file."""
    return Path(arg).expanduser() if _looks_like_path(arg) else _find_session(arg, directory)


def _find_session(arg: str, directory: Path) -> Path:
    """The session file ``arg`` names: a path that exists, or the file in ``directory``
    whose session id starts with ``arg`` (the newest, if several do)."""
    if _looks_like_path(arg):
        path = Path(arg).expanduser()
        if not path.is_file():
            raise CommandError(f"No session found matching '{arg}'")
        return path
    try:
        # A session file is named <timestamp>_<id>.jsonl (session_file_name).
        found = sorted(
            p
            for p in directory.glob("*_*.jsonl")
            if p.is_file() and p.stem.split("_", 1)[1].startswith(arg)
        )
    except OSError as exc:
        raise CommandError(f"cannot list {directory}: {exc.strerror or exc}") from exc
    if not arg or not found:
        raise CommandError(f"No session found matching '{arg}'")
    return found[-1]


def prompt_input(args: argparse.Namespace) -> PromptInput:
    """The prompt step of ``chat``/``rpc``: pi's templates and skills, and the key check."""
    from .._pi.resources import load_resources

    config: AgentDirConfig | None = args.agent_dir_config
    resources = load_resources(config.path if config is not None else None, cwd=Path.cwd())
    for warning in resources.warnings:
        print(f"trio-session: warning: {warning}", file=sys.stderr)
    return PromptInput(resources=resources, key_check=key_check(args))
