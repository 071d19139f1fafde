"""The system prompt of a coding session, and the context files it carries.

In our words, what pi 1.6.0's prompt says (its ``system-prompt.ts``), in the same
order of sections, each after the first in ``<name>`` tags:

1. a preamble: a coding assistant, in trio-session, for files, commands and code —
   or, instead, the custom prompt (``--system-prompt``, else ``.pi/SYSTEM.md``, else
   the agent directory's ``SYSTEM.md``), which also replaces 2 and 3;
2. ``tools``: one line per selected tool, and that others may be available;
3. ``rules``: how to use the selected tools, then to be concise and to show paths;
4. ``addendum``: ``--append-system-prompt`` texts, else ``.pi/APPEND_SYSTEM.md``, else
   the agent directory's ``APPEND_SYSTEM.md``;
5. ``project_context``: the context files, each in a ``<project_instructions>`` tag;
6. ``cwd``: the working directory.

The context files (``context_files``), as pi finds them: the agent directory's, then
those of the working directory's ancestors from the root down to the working
directory itself; in each directory the first of ``AGENTS.override.md``,
``AGENTS.md``, ``AGENTS.MD``, ``CLAUDE.md``, ``CLAUDE.MD`` that is a file.

pi's prompt also lists its own documentation; trio-session's has no such section.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .._core.classes import frozen

__all__ = ["ContextFile", "context_files", "prompt_file", "read_prompt_input", "system_prompt"]

#: The names a context file may have, the first found in a directory winning.
CONTEXT_NAMES = ("AGENTS.override.md", "AGENTS.md", "AGENTS.MD", "CLAUDE.md", "CLAUDE.MD")

_PREAMBLE = (
    "You are a coding assistant working inside trio-session, an agent harness for writing"
    " code. You help the user look through files, run commands and change code."
)

#: What each tool does, one line in the ``tools`` section.
SNIPPETS = {
    "read": "Show the contents of a file",
    "bash": "Run a bash command (ls, grep, find and the like)",
    "edit": "Change a file by exact text replacement, with several separate edits in one call"
    " when needed",
    "write": "Create a file or replace all of it",
    "grep": "Search file contents for a pattern (skips what .gitignore lists)",
    "find": "Find files by glob pattern (skips what .gitignore lists)",
    "ls": "List a directory",
}

#: How to use each tool, lines of the ``rules`` section.
GUIDELINES = {
    "read": ("Use read, not cat or sed, to look at files.",),
    "edit": (
        "Use edit for targeted changes, and put all changes to one file in one call.",
        "Every edits[].oldText must match the original file exactly and only once. Keep the"
        " matches short and apart from each other; merge nearby changes rather than spanning"
        " large unchanged regions.",
    ),
    "write": ("Use write only for a new file or for rewriting a whole one.",),
}


@frozen
class ContextFile:
    """A file of instructions for the model.

    Attributes:
        path: where it is.
        content: what it says (without a byte order mark).
    """

    path: Path
    content: str


def _read(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return text.removeprefix("\ufeff")


def _context_in(directory: Path) -> ContextFile | None:
    for name in CONTEXT_NAMES:
        path = directory / name
        if path.is_file() and (content := _read(path)) is not None:
            return ContextFile(path, content)
    return None


def context_files(cwd: Path, agent_dir: Path | None) -> list[ContextFile]:
    """The context files for a session in ``cwd`` (see the module's docstring)."""
    found: list[ContextFile] = []
    if agent_dir is not None and (own := _context_in(agent_dir.resolve())) is not None:
        found.append(own)
    seen = {f.path for f in found}
    ancestors = []
    for directory in [cwd.resolve(), *cwd.resolve().parents]:
        file = _context_in(directory)
        if file is not None and file.path not in seen:
            ancestors.append(file)
            seen.add(file.path)
    return found + ancestors[::-1]


def prompt_file(cwd: Path, agent_dir: Path | None, name: str) -> Path | None:
    """``.pi/NAME`` of ``cwd`` if it exists, else the agent directory's ``NAME``, else
    None (``SYSTEM.md``, ``APPEND_SYSTEM.md``)."""
    for directory in (cwd / ".pi", agent_dir):
        if directory is not None and (directory / name).exists():
            return directory / name
    return None


def read_prompt_input(value: str) -> str:
    """A prompt flag's value: the text of the file it names, if it names one, else itself."""
    path = Path(value).expanduser()
    if path.exists() and (text := _read(path)) is not None:
        return text
    return value


def _rules(tools: Sequence[str]) -> list[str]:
    rules: list[str] = []
    if "bash" in tools and not {"grep", "find", "ls"} & set(tools):
        rules.append("Use bash for file work such as ls, rg and find.")
    for name in tools:
        rules.extend(r for r in GUIDELINES.get(name, ()) if r not in rules)
    rules += ["Keep your answers concise.", "Name file paths clearly when you work with files."]
    return [f"- {rule}" for rule in rules]


def system_prompt(
    *,
    cwd: Path,
    tools: Sequence[str],
    custom: str | None = None,
    append: Sequence[str] = (),
    context: Sequence[ContextFile] = (),
) -> str:
    """The system prompt (see the module's docstring for its sections).

    Args:
        cwd: the working directory.
        tools: the names of the tools the model is given, in order.
        custom: a prompt replacing the preamble, tools and rules, if given.
        append: texts added after them.
        context: the context files.
    """
    sections: list[tuple[str, str]] = []
    if custom:
        preamble = custom
    else:
        preamble = _PREAMBLE
        listed = [f"- {name}: {SNIPPETS[name]}" for name in tools if name in SNIPPETS]
        tools_text = "\n".join(listed) if listed else "(none)"
        sections.append(("tools", f"{tools_text}\n\nOther tools may also be available."))
        sections.append(("rules", "\n".join(_rules(tools))))
    if added := "\n\n".join(a for a in append if a):
        sections.append(("addendum", added))
    if context:
        files = [
            f'<project_instructions path="{f.path}">\n{f.content}\n</project_instructions>'
            for f in context
        ]
        sections.append(
            (
                "project_context",
                "\n\n".join(["Instructions and guidelines for this project:", *files]),
            )
        )
    sections.append(("cwd", str(cwd)))
    return "\n\n".join([preamble, *(f"<{n}>\n{text}\n</{n}>" for n, text in sections)])
