"""pi's prompt templates and skills, found and expanded as pi 1.6.0 does it.

Where they are read from (pi 1.6.0's package-manager.js auto-discovery):

```text
AGENT_DIR/prompts/*.md            templates: the direct .md children
AGENT_DIR/skills/                 skills: a directory holding SKILL.md is one skill
                                  (nothing below it is read); other directories are
                                  searched; a .md file directly in skills/ is a
                                  skill too when its frontmatter has a description
~/.agents/skills/                 skills too (no .md directly in it)
<cwd>/.pi/prompts, .pi/skills,    the project's: only for a project trusted in
.agents/skills up to the git root AGENT_DIR/trust.json, as pi 1.6.0 without a UI
```

Names or directories starting with ``.``, and ``node_modules``, are skipped; the
project's come first. A template is named by its file (``review.md`` is ``/review``);
its description is the frontmatter's ``description``, else its first non-empty line
(60 characters, then ``...``). A skill is named by its frontmatter ``name``, else its
directory; one without a description is left out. When two have one name, the first
found is kept and a warning names the other.

``expand`` is what pi's ``AgentSession.prompt`` does to the text first:
``/skill:NAME args`` becomes the skill's block (its body re-read now) followed by
the arguments; then ``/NAME args`` with a template's name becomes the template with
pi's argument substitution. Any other text, an unknown ``/name`` included, is sent as
it is.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from .._core.classes import frozen
from .frontmatter import FrontmatterError, js_trim, parse_frontmatter

#: The largest template or skill file read, in bytes.
MAX_RESOURCE_FILE_BYTES = 256 * 1024
#: pi's limits on a skill's name and description (the Agent Skills specification).
MAX_SKILL_NAME = 64
MAX_SKILL_DESCRIPTION = 1024

_SKILL_NAME = re.compile(r"^[a-z0-9-]+$")
_TEMPLATE_CALL = re.compile(r"^/(\S+)(?:\s+(.*))?$", re.DOTALL)
_PLACEHOLDER = re.compile(
    r"\$\{([0-9]+|ARGUMENTS|@):-([^}]*)\}|\$\{@:([0-9]+)(?::([0-9]+))?\}|\$(ARGUMENTS|@|[0-9]+)"
)


class ResourceFileError(OSError):
    """A template or skill file that is not read: not a regular file, or too large."""


def read_resource_file(path: Path) -> str:
    """The text of one template or skill file, read safely.

    Symbolic links are followed (as pi does); what they lead to must be a regular file
    of at most ``MAX_RESOURCE_FILE_BYTES``. Bytes that are not UTF-8 become U+FFFD, as
    in pi's ``readFileSync(path, "utf-8")``.

    Args:
        path: the file.

    Returns:
        Its text.

    Raises:
        OSError: it cannot be opened or read, is not a regular file, or is too large
            (``ResourceFileError`` for the last two).
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ResourceFileError("not a regular file")
        with os.fdopen(os.dup(fd), "rb") as file:
            data = file.read(MAX_RESOURCE_FILE_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_RESOURCE_FILE_BYTES:
        raise ResourceFileError(f"larger than {MAX_RESOURCE_FILE_BYTES} bytes")
    return data.decode("utf-8", errors="replace")


def parse_command_args(text: str) -> list[str]:
    """The arguments of a template call, split as pi 1.6.0's ``parseCommandArgs``.

    White space separates arguments. A quote opens only at the start of an argument
    (so ``doesn't`` stays one word) and may hold white space; inside it a backslash
    before the same quote keeps that quote; ``""`` is an empty argument. A quote that
    is never closed is an ordinary character.

    Args:
        text: what follows the template's name.

    Returns:
        The arguments.
    """
    args: list[str] = []
    current = ""
    started = False
    quote: str | None = None
    quote_start = 0
    at = 0
    while at < len(text):
        char = text[at]
        if quote is not None:
            if char == "\\" and text[at + 1 : at + 2] == quote:
                current += quote
                at += 1
            elif char == quote:
                quote = None
            else:
                current += char
        elif char in "\"'" and not started:
            quote, quote_start, started = char, at, True
        elif char.isspace():
            if started:
                args.append(current)
                current, started = "", False
        else:
            current += char
            started = True
        if quote is not None and at == len(text) - 1:
            # Never closed: the quote is text, and what followed it is read again.
            quote, current, at = None, text[quote_start], quote_start
        at += 1
    if started:
        args.append(current)
    return args


def substitute_args(content: str, args: Sequence[str]) -> str:
    """A template with its placeholders filled, as pi 1.6.0's ``substituteArgs``.

    ``$1`` ... (one argument, empty if missing), ``$@`` and ``$ARGUMENTS`` (all, joined
    by spaces), ``${N:-default}`` and ``${@:-default}`` (the default when empty),
    ``${@:N}`` (from the Nth on), ``${@:N:L}`` (L from the Nth). Only the template is
    scanned: an argument holding ``$1`` is not substituted again.

    Args:
        content: the template's body.
        args: the arguments.

    Returns:
        The text to send.
    """
    joined = " ".join(args)

    def nth(number: str) -> str | None:
        index = int(number) - 1
        return args[index] if 0 <= index < len(args) else None

    def replace(match: re.Match[str]) -> str:
        target, default, start, length, simple = match.groups()
        if target is not None:
            value = joined if target in ("@", "ARGUMENTS") else nth(target)
            return value or default
        if start is not None:
            first = max(int(start) - 1, 0)
            last = first + int(length) if length is not None else len(args)
            return " ".join(args[first:last])
        if simple in ("@", "ARGUMENTS"):
            return joined
        return nth(simple) or ""

    return _PLACEHOLDER.sub(replace, content)


@frozen
class PromptTemplate:
    """One prompt template: ``/name`` expands to ``content``."""

    name: str
    description: str
    content: str
    path: Path
    source_info: dict[str, Any]
    argument_hint: str | None = None


@frozen
class Skill:
    """One skill: ``/skill:name`` sends its instructions (``path``, re-read then)."""

    name: str
    description: str
    path: Path
    source_info: dict[str, Any]
    disable_model_invocation: bool = False


@frozen
class PiResources:
    """The prompt templates and skills found, and what could not be read.

    Attributes:
        templates: the prompt templates, in pi's order (the project's first).
        skills: the skills, in pi's order.
        warnings: one line per file left out or name given twice, and why.
    """

    templates: tuple[PromptTemplate, ...] = ()
    skills: tuple[Skill, ...] = ()
    warnings: tuple[str, ...] = ()

    def commands(self) -> list[dict[str, Any]]:
        """The ``get_commands`` entries, pi's shape: templates, then ``skill:NAME``.

        Returns:
            ``{name, description, source, sourceInfo}`` per command.
        """
        return [
            {
                "name": t.name,
                "description": t.description,
                "source": "prompt",
                "sourceInfo": t.source_info,
            }
            for t in self.templates
        ] + [
            {
                "name": f"skill:{s.name}",
                "description": s.description,
                "source": "skill",
                "sourceInfo": s.source_info,
            }
            for s in self.skills
        ]

    def expand(self, text: str) -> str:
        """``text`` with a leading ``/skill:name`` or ``/template`` expanded, as pi does.

        Args:
            text: the prompt as typed.

        Returns:
            The text the model is to get (``text`` itself if it names no command).
        """
        return self._expand_template(self._expand_skill(text))

    def _expand_skill(self, text: str) -> str:
        if not text.startswith("/skill:"):
            return text
        space = text.find(" ")
        name = text[7:] if space == -1 else text[7:space]
        args = "" if space == -1 else js_trim(text[space + 1 :])
        skill = next((s for s in self.skills if s.name == name), None)
        if skill is None:
            return text
        try:
            body = js_trim(parse_frontmatter(read_resource_file(skill.path))[1])
        except (OSError, FrontmatterError):  # as pi: the text goes on as typed
            return text
        block = (
            f'<skill name="{skill.name}" location="{skill.path}">\n'
            f"References are relative to {skill.path.parent}.\n\n{body}\n</skill>"
        )
        return f"{block}\n\n{args}" if args else block

    def _expand_template(self, text: str) -> str:
        match = _TEMPLATE_CALL.match(text) if text.startswith("/") else None
        if match is None:
            return text
        template = next((t for t in self.templates if t.name == match.group(1)), None)
        if template is None:
            return text
        return substitute_args(template.content, parse_command_args(match.group(2) or ""))


def load_resources(agent_dir: Path | None, *, cwd: Path, home: Path | None = None) -> PiResources:
    """The templates and skills of ``agent_dir``, ``~/.agents`` and a trusted project.

    Args:
        agent_dir: pi's agent directory; nothing is read without it.
        cwd: the working directory (its ``.pi`` is read when AGENT_DIR/trust.json
            trusts it).
        home: the home directory (``~/.agents/skills``); ``Path.home()`` if ``None``.

    Returns:
        What was found, and a warning per file left out.
    """
    if agent_dir is None:
        return PiResources()
    agent_dir = agent_dir.expanduser().absolute()
    cwd = cwd.absolute()
    agents_home = (home if home is not None else Path.home()).absolute() / ".agents"
    warnings: list[str] = []
    template_files: list[tuple[Path, dict[str, Any]]] = []
    skill_files: list[tuple[Path, dict[str, Any]]] = []
    if _project_trusted(agent_dir, cwd, warnings):
        project = cwd / ".pi"
        info = _source_info("project", project)
        skill_files += [(p, info) for p in _skill_entries(project / "skills", root_md=True)]
        for skills_dir in _ancestor_agents_skills(cwd, agents_home / "skills"):
            info = _source_info("project", skills_dir.parent)
            skill_files += [(p, info) for p in _skill_entries(skills_dir, root_md=False)]
        info = _source_info("project", project)
        template_files += [(p, info) for p in _markdown_children(project / "prompts")]
    info = _source_info("user", agent_dir)
    skill_files += [(p, info) for p in _skill_entries(agent_dir / "skills", root_md=True)]
    home_info = _source_info("user", agents_home)
    skill_files += [(p, home_info) for p in _skill_entries(agents_home / "skills", root_md=False)]
    template_files += [(p, info) for p in _markdown_children(agent_dir / "prompts")]
    return PiResources(
        templates=_load_templates(template_files, warnings),
        skills=_load_skills(skill_files, warnings),
        warnings=tuple(warnings),
    )


def _source_info(scope: str, base_dir: Path) -> dict[str, Any]:
    return {"source": "auto", "scope": scope, "origin": "top-level", "baseDir": str(base_dir)}


def _entries(directory: Path) -> list[tuple[Path, bool, bool]]:
    """``(path, is_dir, is_file)`` per entry, sorted by name, links followed, broken
    links, dot names and ``node_modules`` left out."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    found: list[tuple[Path, bool, bool]] = []
    for name in names:
        if name.startswith(".") or name == "node_modules":
            continue
        path = directory / name
        try:
            mode = path.stat().st_mode
        except OSError:
            continue
        found.append((path, stat.S_ISDIR(mode), stat.S_ISREG(mode)))
    return found


def _markdown_children(directory: Path) -> list[Path]:
    return [p for p, _, is_file in _entries(directory) if is_file and p.name.endswith(".md")]


def _skill_entries(directory: Path, *, root_md: bool, root: Path | None = None) -> Iterator[Path]:
    """pi's ``collectSkillEntries``: SKILL.md ends the search of its directory."""
    root = root if root is not None else directory
    skill = directory / "SKILL.md"
    if skill.is_file():
        yield skill
        return
    for path, is_dir, is_file in _entries(directory):
        at_root = directory == root
        if is_file and path.name.endswith(".md") and (at_root if root_md else not at_root):
            yield path
        elif is_dir:
            yield from _skill_entries(path, root_md=root_md, root=root)


def _ancestor_agents_skills(cwd: Path, user_skills: Path) -> list[Path]:
    """``.agents/skills`` of ``cwd`` and each parent up to the git root (or ``/``)."""
    found: list[Path] = []
    git_root = next((d for d in (cwd, *cwd.parents) if (d / ".git").exists()), None)
    for directory in (cwd, *cwd.parents):
        candidate = directory / ".agents" / "skills"
        if candidate != user_skills:
            found.append(candidate)
        if directory == git_root:
            break
    return found


def _project_trusted(agent_dir: Path, cwd: Path, warnings: list[str]) -> bool:
    """pi 1.6.0 without a UI: the nearest entry of AGENT_DIR/trust.json for ``cwd`` or
    a parent decides; with none, the project is not trusted."""
    trust_file = agent_dir / "trust.json"
    if not trust_file.exists():
        return False
    try:
        data = json.loads(read_resource_file(trust_file).removeprefix("\ufeff"))
    except (OSError, ValueError) as exc:
        warnings.append(f"{trust_file}: not read ({exc}); the project's .pi is not trusted")
        return False
    if not isinstance(data, dict):
        warnings.append(f"{trust_file}: not an object; the project's .pi is not trusted")
        return False
    real = Path(os.path.realpath(cwd))
    for directory in (real, *real.parents):
        decision = data.get(str(directory))
        if isinstance(decision, bool):
            return decision
    return False


def _left_out(path: Path, exc: OSError | FrontmatterError) -> str:
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return f"{path}: left out ({reason})"


def _load_templates(
    files: list[tuple[Path, dict[str, Any]]], warnings: list[str]
) -> tuple[PromptTemplate, ...]:
    templates: dict[str, PromptTemplate] = {}
    real_paths: set[str] = set()
    for path, info in files:
        real = os.path.realpath(path)
        if real in real_paths:
            continue  # the same file again, through a link
        real_paths.add(real)
        try:
            fields, body = parse_frontmatter(read_resource_file(path))
        except (OSError, FrontmatterError) as exc:
            warnings.append(_left_out(path, exc))
            continue
        description = fields.get("description")
        if not isinstance(description, str) or not description:
            first = next((line for line in body.split("\n") if js_trim(line)), "")
            description = first[:60] + ("..." if len(first) > 60 else "")
        hint = fields.get("argument-hint")
        name = path.name.removesuffix(".md")
        if name in templates:
            warnings.append(f'{path}: name "/{name}" collision; {templates[name].path} is kept')
            continue
        templates[name] = PromptTemplate(
            name=name,
            description=description,
            content=body,
            path=path,
            source_info={"path": str(path), **info},
            argument_hint=hint if isinstance(hint, str) and hint else None,
        )
    return tuple(templates.values())


def _load_skills(
    files: list[tuple[Path, dict[str, Any]]], warnings: list[str]
) -> tuple[Skill, ...]:
    skills: dict[str, Skill] = {}
    real_paths: set[str] = set()
    for path, info in files:
        declared = path.name == "SKILL.md"
        try:
            fields, _ = parse_frontmatter(read_resource_file(path))
        except (OSError, FrontmatterError) as exc:
            if declared or isinstance(exc, OSError):  # pi is silent on a loose .md's YAML
                warnings.append(_left_out(path, exc))
            continue
        description = fields.get("description")
        described = isinstance(description, str) and bool(js_trim(description))
        if not declared and not described:
            continue
        name = fields.get("name") if isinstance(fields.get("name"), str) else None
        name = name or path.parent.name
        for problem in _skill_problems(name, description):
            warnings.append(f"{path}: {problem}")
        if not isinstance(description, str) or not described:
            continue
        real = os.path.realpath(path)
        if real in real_paths:
            continue  # the same file again, through a link
        if name in skills:
            warnings.append(f'{path}: name "{name}" collision; {skills[name].path} is kept')
            continue
        real_paths.add(real)
        skills[name] = Skill(
            name=name,
            description=description,
            path=path,
            source_info={"path": str(path), **info},
            disable_model_invocation=fields.get("disable-model-invocation") is True,
        )
    return tuple(skills.values())


def _skill_problems(name: str, description: Any) -> list[str]:
    """pi's validation warnings (the skill is still loaded unless it has no description)."""
    problems: list[str] = []
    if not isinstance(description, str) or not js_trim(description):
        problems.append("description is required")
    elif len(description) > MAX_SKILL_DESCRIPTION:
        problems.append(
            f"description exceeds {MAX_SKILL_DESCRIPTION} characters ({len(description)})"
        )
    if len(name) > MAX_SKILL_NAME:
        problems.append(f"name exceeds {MAX_SKILL_NAME} characters ({len(name)})")
    if not _SKILL_NAME.match(name):
        problems.append(
            "name contains invalid characters (must be lowercase a-z, 0-9, hyphens only)"
        )
    if name.startswith("-") or name.endswith("-"):
        problems.append("name must not start or end with a hyphen")
    if "--" in name:
        problems.append("name must not contain consecutive hyphens")
    return problems
