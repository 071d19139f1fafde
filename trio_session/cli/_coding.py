"""What ``chat`` and ``rpc`` give the model: the coding tools, and the system prompt.

As pi 1.6.0 chooses them (docs/tools.md): the tools of ``--tools`` / ``--no-tools``
over the ``defaultTools`` setting (pi's ``read``, ``bash``, ``edit``, ``write`` by
default), working in the current directory; the system prompt naming them, with
``--system-prompt`` (else ``SYSTEM.md``) and ``--append-system-prompt`` (else
``APPEND_SYSTEM.md``), and the context files unless ``--no-context-files``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .._coding_tools import (
    CODING_TOOL_NAMES,
    coding_tools,
    default_tools,
    select_tools,
)
from .._coding_tools._prompt import (
    context_files,
    prompt_file,
    read_prompt_input,
    system_prompt,
)
from .._commands import CommandError
from .._settings.store import SettingsStore


def tool_names(args: argparse.Namespace, settings: SettingsStore) -> list[str]:
    """The names of the tools ``--tools``, ``--no-tools`` and ``defaultTools`` select.

    A name in ``defaultTools`` that is none of ours (pi's ``codemode``, an extension's
    tool) is left out with a warning on stderr: the setting may be pi's own.

    Raises:
        CommandError: ``--tools`` mixes names and ``+``/``-`` entries, or names a tool
            that is not one of the coding tools.
    """
    base = [] if args.no_tools else default_tools(settings.current.default_tools)
    for name in [n for n in base if n not in CODING_TOOL_NAMES]:
        print(f"trio-session: warning: defaultTools: no tool is called {name!r}", file=sys.stderr)
        base.remove(name)
    names = base
    if args.tools is not None:
        try:
            names = select_tools(args.tools.split(","), base)
        except ValueError as exc:
            raise CommandError(f"--tools: {exc}") from None
    unknown = [n for n in names if n not in CODING_TOOL_NAMES]
    if unknown:
        known = ", ".join(CODING_TOOL_NAMES)
        raise CommandError(f"no tool is called {unknown[0]!r} (the tools: {known})")
    return names


def coding_inputs(args: argparse.Namespace, settings: SettingsStore) -> None:
    """Put the tools (``args.tools``) and the system prompt (``args.system_prompt``,
    read by ``provider_inputs`` already if it was a file) into ``args``."""
    cwd = Path.cwd()
    names = tool_names(args, settings)
    args.tools = coding_tools(cwd, names)
    agent_dir = args.agent_dir_config.path if args.agent_dir_config is not None else None
    custom = args.system_prompt
    if custom is None and (found := prompt_file(cwd, agent_dir, "SYSTEM.md")) is not None:
        custom = read_prompt_input(str(found))
    append = [read_prompt_input(value) for value in args.append_system_prompt]
    if not append and (found := prompt_file(cwd, agent_dir, "APPEND_SYSTEM.md")) is not None:
        append = [read_prompt_input(str(found))]
    args.system_prompt = system_prompt(
        cwd=cwd,
        tools=names,
        custom=custom,
        append=append,
        context=[] if args.no_context_files else context_files(cwd, agent_dir),
    )
