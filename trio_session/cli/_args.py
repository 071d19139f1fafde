"""``trio-session``'s argv: the parser, and the flags it shares with pi.

Every parser is built with ``allow_abbrev=False``: argparse would otherwise read a
prefix of a long flag as the flag (pi's ``--mode rpc`` as our ``--model rpc``).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence

from .. import __version__
from .._pi.config import AGENT_DIR_VARIABLE
from .._settings.store import RANGES, RETRY_PROFILES

#: ``--thinking``'s levels, pi's: ``max`` is pi 1.6.0's name above ``xhigh``.
THINKING_CHOICES = ("off", "minimal", "low", "medium", "high", "xhigh", "max")

#: The subcommands, in the order ``--help`` lists them.
COMMANDS = ("demo", "chat", "rpc", "conformance", "auth")

#: pi's print flags: before any subcommand they stand for ``chat -p`` (``print_shorthand``).
PRINT_FLAGS = ("-p", "--print")


class CommandParser(argparse.ArgumentParser):
    """A subcommand's parser: an argument it does not know is its error, said with its usage.

    argparse hands a subcommand's unknown arguments back to the top parser, which
    would refuse them with the top-level usage; ``trio-session chat --bogus`` should
    show ``chat``'s.
    """

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras


def print_shorthand(argv: Sequence[str]) -> list[str]:
    """``trio-session -p QUESTION [OPTIONS]`` as ``trio-session chat -p QUESTION [OPTIONS]``.

    pi's ``pi -p "question"`` has no subcommand; ours is ``chat``'s print mode. Any
    other argv is returned as it is.
    """
    words = list(argv)
    shorthand = words and words[0] not in (*COMMANDS, "-h", "--help", "--version")
    return ["chat", *words] if shorthand and set(PRINT_FLAGS) & set(words) else words


def _settings_options(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--settings",
        metavar="FILE",
        action="append",
        default=[],
        help="a settings JSON file, above the global and project ones (repeatable)",
    )
    command.add_argument(
        "--retry-profile",
        choices=RETRY_PROFILES,
        help="whose retry rules to follow: seed (pi 0.73.1's, the default) or pi-1.6 "
        "(pi 1.6.0's); over the settings' retry.profile (docs/spec.md R-53)",
    )
    command.add_argument(
        "--ignore-broken-settings",
        action="store_true",
        help="start without a settings file that cannot be read, with a warning",
    )
    command.add_argument(
        "-e",
        "--extension",
        metavar="FILE",
        action="append",
        default=[],
        help="load an extension from a Python file (repeatable)",
    )


def _provider_options(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--provider",
        metavar="NAME",
        help="the model provider: openai, anthropic, gemini, faux, or (with --agent-dir) a "
        "provider of pi's (default: the settings' defaultProvider, else openai; keys: "
        "trio-session auth, OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY)",
    )
    command.add_argument(
        "--model",
        metavar="ID",
        help="the model id, or PROVIDER/ID, with an optional :LEVEL thinking suffix as pi's "
        "(default: the settings' defaultModel, else the provider's)",
    )
    command.add_argument(
        "--thinking",
        metavar="LEVEL",
        choices=THINKING_CHOICES,
        help=f"the starting thinking level: {', '.join(THINKING_CHOICES)} (over a --model "
        "suffix; clamped to what the model can do)",
    )
    command.add_argument(
        "--agent-dir",
        metavar="DIR",
        help="read pi's agent directory: DIR/settings.json, DIR/models.json, DIR/auth.json, "
        f"DIR/prompts, DIR/skills and ./.pi/ (default: ${AGENT_DIR_VARIABLE} if set)",
    )
    command.add_argument(
        "--base-url",
        metavar="URL",
        help="the API root, e.g. a local OpenAI-compatible server's http://127.0.0.1:8080/v1 "
        "(default: the model's, else $OPENAI_BASE_URL / $ANTHROPIC_BASE_URL / "
        "$GEMINI_BASE_URL, else the provider's own; a key is optional off the provider's own)",
    )
    keys = command.add_mutually_exclusive_group()
    keys.add_argument(
        "--api-key",
        metavar="KEY",
        help="use this key; every local user can read it in ps (prefer --api-key-file)",
    )
    keys.add_argument(
        "--api-key-file",
        metavar="PATH",
        help="use the key on the first line of PATH ('-': one line of stdin)",
    )
    command.add_argument(
        "--credentials",
        metavar="URL",
        help="share usage-limit blocks with a fleet through Redis: redis://HOST:PORT/DB, "
        "rediss://… (TLS) or unix:///PATH (default: the settings' credentials.url, else "
        "the local key store)",
    )
    command.add_argument(
        "--timeout",
        metavar="SECONDS",
        type=_seconds("retry.provider.timeoutMs"),
        help="give up on an attempt after this long in all (retry.provider.timeoutMs; 600)",
    )
    command.add_argument(
        "--idle-timeout",
        metavar="SECONDS",
        type=_seconds("retry.provider.idleTimeoutMs"),
        help="give up on an attempt after this long without a byte "
        "(retry.provider.idleTimeoutMs; 120)",
    )
    command.add_argument(
        "--context-window", metavar="TOKENS", type=int, help="the model's context window"
    )
    command.add_argument(
        "--faux", metavar="SCRIPT", help="play a JSON faux script instead of a real model"
    )
    command.add_argument(
        "--system-prompt",
        "--system",
        dest="system_prompt",
        metavar="TEXT|FILE",
        help="the system prompt: this text, or the contents of this file if it is one, "
        "instead of the coding assistant's (over .pi/SYSTEM.md and the agent directory's)",
    )
    _coding_options(command)
    command.add_argument(
        "--offline",
        action="store_true",
        help="pi's: no automatic network activity (trio-session makes none; accepted)",
    )


def _coding_options(command: argparse.ArgumentParser) -> None:
    """pi's flags for the coding tools and what the system prompt carries (docs/tools.md)."""
    command.add_argument(
        "--append-system-prompt",
        metavar="TEXT|FILE",
        action="append",
        default=[],
        help="add this text (or this file's) after the system prompt (repeatable; over "
        ".pi/APPEND_SYSTEM.md and the agent directory's)",
    )
    command.add_argument(
        "-t",
        "--tools",
        metavar="LIST",
        help="the tools, comma-separated: names replace the default read,bash,edit,write "
        "(or the settings' defaultTools); +name / -name entries change it (tools: read, "
        "bash, edit, write, grep, find, ls)",
    )
    command.add_argument(
        "-nt", "--no-tools", action="store_true", help="give the model no tool at all"
    )
    command.add_argument(
        "-nc",
        "--no-context-files",
        action="store_true",
        help="leave the AGENTS.md / CLAUDE.md files out of the system prompt",
    )


def _session_options(command: argparse.ArgumentParser, *, chat: bool) -> None:
    """pi's session flags: which session file to start with, and where new ones go.

    As pi: ``--no-session`` wins over the others, then ``--session``, ``--resume``,
    ``--continue``; only ``--fork`` refuses company (``session_start``).
    """
    command.add_argument(
        "-c",
        "--continue",
        dest="continue_",
        action="store_true",
        help="continue the latest session of this directory",
    )
    command.add_argument(
        "-r",
        "--resume",
        metavar="FILE",
        nargs="?",
        const="",
        help="continue the session in FILE; without FILE, pick one of this directory's "
        "sessions (on a terminal; elsewhere the latest)",
    )
    command.add_argument(
        "--session",
        metavar="FILE|ID",
        help="open this session file (created if missing), or the session of this "
        "directory whose id starts with ID",
    )
    command.add_argument(
        "--fork",
        metavar="FILE|ID",
        help="copy this session (a file, or an id as --session) into a new one, and open it",
    )
    names = ("--no-session", "--no-save") if chat else ("--no-session",)
    command.add_argument(
        *names, dest="no_session", action="store_true", help="keep no session file"
    )
    command.add_argument(
        "--session-dir",
        metavar="DIR",
        help="where session files are kept (default: the settings' sessionDir, else ours "
        "for the cwd)",
    )
    command.add_argument("-n", "--name", metavar="NAME", help="the session's display name")


def _seconds(key: str) -> Callable[[str], float]:
    """An argparse type: seconds within the range of the settings ``key`` (milliseconds)."""
    low, high = (ms / 1000 for ms in RANGES[key])

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not low <= value <= high:  # NaN is in no range
            msg = f"must be a number of seconds from {low:g} to {high:g}, not {text!r}"
            raise argparse.ArgumentTypeError(msg)
        return value

    return parse


def parser() -> argparse.ArgumentParser:
    """The ``trio-session`` command line: ``demo``, ``chat``, ``rpc``, ``conformance``,
    ``auth``."""
    top = argparse.ArgumentParser(
        prog="trio-session",
        description="LLM agent sessions on Trio, with structural retry cancellation.",
        epilog="'trio-session -p MESSAGE [OPTIONS]' is 'trio-session chat -p MESSAGE "
        "[OPTIONS]': print the answer and exit. 'trio-session COMMAND --help' shows a "
        "command's options.",
        allow_abbrev=False,
    )
    top.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = top.add_subparsers(
        dest="command", required=True, metavar="COMMAND", parser_class=CommandParser
    )

    def command(name: str, help: str, description: str | None = None) -> argparse.ArgumentParser:
        made: argparse.ArgumentParser = commands.add_parser(
            name, help=help, description=description, allow_abbrev=False
        )
        return made

    demo = command("demo", help="run an offline session that retries two 503s, then answers")
    demo.add_argument("--json", action="store_true", help="print events as JSON lines")
    _settings_options(demo)

    chat = command(
        "chat",
        help="chat with a model (a terminal UI on a TTY)",
        description="Chat with a model: a terminal UI on a terminal, else one prompt per "
        "line of stdin. Each MESSAGE is sent first, in order; with -p the answer to the "
        "last is printed and the command exits.",
    )
    chat.add_argument(
        "messages",
        nargs="*",
        metavar="MESSAGE",
        help="a prompt to send first (quote it; several are sent in turn)",
    )
    chat.add_argument(
        "-p",
        "--print",
        action="store_true",
        help="print mode, as pi's: send the MESSAGEs (after piped stdin, if any), print "
        "the last answer on stdout and exit; retries and errors go to stderr",
    )
    _provider_options(chat)
    _settings_options(chat)
    _session_options(chat, chat=True)
    chat.add_argument(
        "--mode", choices=["text"], help="pi's --mode text: the chat (the only mode it has)"
    )

    rpc = command(
        "rpc",
        help="serve sessions over JSON lines on stdin/stdout (see docs/rpc.md)",
        description="Read one JSON command per line on stdin; write responses and session "
        "events as JSON lines on stdout, as the reference's --mode rpc does.",
    )
    _provider_options(rpc)
    _settings_options(rpc)
    _session_options(rpc, chat=False)
    rpc.add_argument(
        "--mode", choices=["rpc"], help="pi's --mode rpc, as pi's clients pass it (accepted)"
    )
    rpc.add_argument(
        "--lean-updates",
        action="store_true",
        help="write message_update events with deltas only, without the message so far "
        "(not the reference's shape; see docs/rpc.md)",
    )

    conformance = command(
        "conformance",
        help="check an RPC agent's retry policy against docs/spec.md (see docs/conformance.md)",
        description="Start a scripted loopback LLM server, run the retry scenarios against "
        "the agent command given after '--' (it must speak pi's RPC protocol), and print "
        "one row per scenario. Exit status 0 only when every non-[beyond] rule holds.",
    )
    conformance.add_argument("--json", action="store_true", help="print the results as JSON")
    conformance.add_argument(
        "--only", metavar="NAME,…", help="run only these scenarios (comma-separated)"
    )
    conformance.add_argument(
        "--profile",
        default="seed",
        metavar="PROFILE",
        help="whose rules to check: seed (pi 0.73.1's, the default) or pi-1.6 (pi 1.6.0's)",
    )
    conformance.add_argument(
        "--verbose", action="store_true", help="list every request under every row"
    )
    conformance.add_argument(
        "agent_command", nargs="*", metavar="-- COMMAND", help="the agent, in RPC mode"
    )

    auth = command("auth", help="manage API keys in the credential store")
    actions = auth.add_subparsers(dest="auth", required=True, metavar="ACTION")
    add = actions.add_parser("add", help="store a key (typed hidden, or one line of stdin)")
    add.add_argument("provider", help="openai, anthropic, or another provider name")
    add.add_argument("--label", help="a name for this key")
    actions.add_parser("list", help="list keys (never printed whole)")
    remove = actions.add_parser("remove", help="remove a key")
    remove.add_argument("provider")
    remove.add_argument("which", help="the key's label or its #index from 'auth list'")
    return top
