"""The ``trio-session`` command's entry point: parse argv, run the command, map errors."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio

from .._command_keys import auth_add, auth_list, auth_remove
from .._commands import CommandError, load_settings
from .._core.errors import TrioSessionError
from ._args import parser, print_shorthand
from ._coding import coding_inputs
from ._output import is_terminal
from ._setup import agent_dir, check_path_flags, extensions, provider_inputs

# The terminal UI and the RPC server are imported by the command that runs them: ``rpc``
# does not load the UI, and ``chat`` on a pipe loads neither.


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``trio-session`` command.

    Args:
        argv: the arguments after the program name; ``sys.argv[1:]`` if omitted.

    Returns:
        The exit status: 0, 1 (a prompt failed), 2 (a usage or set-up error), or
        128 + a signal's number.
    """
    args = parser().parse_args(print_shorthand(sys.argv[1:] if argv is None else argv))
    status = 2
    try:
        status = _run(args)
    except* (CommandError, TrioSessionError) as group:
        for exc in group.exceptions:
            print(f"trio-session: {exc}", file=sys.stderr)
        status = 2
    except* KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        status = 130
    except* BrokenPipeError:  # the reader went away (``trio-session demo | head``)
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silences the flush at exit
        status = 0
    return status


def run_auth(args: argparse.Namespace) -> int:
    """``trio-session auth add|list|remove``: keys in the credential store, never printed."""
    if args.auth == "add":
        print(auth_add(args.provider, args.label))
    elif args.auth == "list":
        for line in auth_list():
            print(line)
    else:
        print(auth_remove(args.provider, args.which))
    return 0


def _conformance(args: argparse.Namespace) -> int:
    from ..conformance import run_command  # the kit loads only for this command

    command = list(args.agent_command)
    if command[:1] == ["--"]:
        command = command[1:]
    only = [name.strip() for name in args.only.split(",") if name.strip()] if args.only else None
    try:
        return run_command(
            command, only, args.json, sys.stdout, sys.stderr, args.profile, args.verbose
        )
    except ValueError as exc:
        raise CommandError(str(exc)) from None


def _existing_settings(paths: Sequence[str], *, ignore_missing: bool) -> list[str]:
    """The ``--settings`` files, each of which must exist (a global or project file may not).

    Raises:
        CommandError: a file is missing, unless ``ignore_missing``
            (``--ignore-broken-settings``): then it is left out, with a warning.
    """
    kept = []
    for path in paths:
        if Path(path).exists():
            kept.append(path)
        elif ignore_missing:
            print(f"trio-session: warning: ignoring {path}: it does not exist", file=sys.stderr)
        else:
            hint = "; to start without it, add --ignore-broken-settings"
            raise CommandError(f"settings file {path} does not exist (--settings){hint}")
    return kept


def _run(args: argparse.Namespace) -> int:
    if args.command == "auth":
        return run_auth(args)
    if args.command == "conformance":
        return _conformance(args)
    check_path_flags(args)
    args.settings = _existing_settings(args.settings, ignore_missing=args.ignore_broken_settings)
    # pi's agent directory is for chat and rpc only; the demo reads nothing of the user's.
    args.agent_dir_config = agent_dir(args.agent_dir) if args.command != "demo" else None
    # The demo is the same everywhere: only --settings files, never the user's own.
    settings = load_settings(
        args.settings,
        defaults=args.command != "demo",
        ignore_broken=args.ignore_broken_settings,
        agent_dir=args.agent_dir_config,
    )
    if args.retry_profile is not None:  # above every file, never written to one
        settings.set("retry.profile", args.retry_profile)
    if args.command == "demo":
        from ._demo import run_demo

        loaded = extensions(args.extension)
        interactive = is_terminal() and not args.json

        async def demo() -> int:
            return await run_demo(
                sys.stdout,
                as_json=args.json,
                settings=settings,
                extensions=loaded,
                interactive=interactive,
            )

        return trio.run(demo)
    provider_inputs(args, settings)
    coding_inputs(args, settings)
    runner: Any
    if args.command == "chat":
        from ._chat import run_chat as runner
    else:
        from ._rpc import run_rpc as runner
    status: int = trio.run(runner, args, settings)
    return status
