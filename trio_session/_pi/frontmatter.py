"""The ``---`` frontmatter of pi's Markdown resources, read as pi 1.6.0 reads it.

pi (``utils/frontmatter.js``) normalizes line ends, drops a byte order mark, and takes
the text between a leading ``---`` and the next line starting with ``---`` as YAML
(the ``yaml`` package, YAML 1.2 core schema); the body is what follows, trimmed.
trio_session needs four top-level fields of it (``name``, ``description``,
``argument-hint``, ``disable-model-invocation``), and reads the part of YAML that
frontmatter uses: a block mapping of plain, quoted and block (``|``, ``>``) scalars;
a nested mapping, list or flow collection is taken whole as a value that is not a
string. What pi's parser rejects is rejected here too (``FrontmatterError``): an
indented first line, a duplicate key, a plain scalar holding ``": "``, an unclosed
quote; a construct outside that part (anchors, aliases, tags, directives) is refused
the same way rather than read differently.
"""

from __future__ import annotations

import re
from typing import Any

#: The characters JavaScript's ``String.prototype.trim`` removes.
_JS_SPACE = (
    " \t\n\v\f\r\u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
    "\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
)

#: A value that is there but is not a string (a mapping, list, number, ...).
NOT_TEXT = object()

_KEY = re.compile(r"^([^\s#'\"{}\[\],&*!|>%@`-][^:#]*?|-[^\s:#][^:#]*?)\s*:(?:[ \t]+(.*))?$")
_BLOCK_HEADER = re.compile(r"^([|>])([-+]?)([1-9]?)([-+]?)\s*(?:#.*)?$")
_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
_ESCAPES = {
    "0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v", "f": "\f",
    "r": "\r", "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\u0085",
    "_": "\u00a0", "L": "\u2028", "P": "\u2029",
}  # fmt: skip


class FrontmatterError(ValueError):
    """The frontmatter is not YAML pi would read; the text says where."""


def js_trim(text: str) -> str:
    """``text`` without the leading and trailing white space JavaScript's ``trim`` removes.

    Args:
        text: any text.

    Returns:
        The trimmed text.
    """
    return text.strip(_JS_SPACE)


def split_frontmatter(content: str) -> tuple[str | None, str]:
    """The YAML text (``None`` without frontmatter) and the body, as pi splits them.

    Args:
        content: the file's text.

    Returns:
        ``(yaml, body)``: the body is trimmed when there is frontmatter, whole otherwise.
    """
    text = content.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    if not text.startswith("---"):
        return None, text
    end = text.find("\n---", 3)
    if end == -1:
        return None, text
    return text[4:end], js_trim(text[end + 4 :])


def parse_frontmatter(content: str) -> tuple[dict[str, Any], str]:
    """The frontmatter's top-level fields and the body.

    Args:
        content: the file's text.

    Returns:
        ``(fields, body)``: a string, ``True``/``False``, ``None``, or ``NOT_TEXT`` per
        key; no fields when there is no frontmatter or it is not a mapping.

    Raises:
        FrontmatterError: pi's YAML parser would reject it.
    """
    source, body = split_frontmatter(content)
    if not source:
        return {}, body
    lines = source.split("\n")
    if lines[-1] == "":  # the text after the last line break is no line
        lines.pop()
    return _Reader(_dedented(lines)).mapping(), body


def _dedented(lines: list[str]) -> list[str]:
    """The lines without the first key's indentation (a mapping may start indented)."""
    first = next((line for line in lines if not _blank(line)), "")
    base = _indent(first)
    if not base:
        return lines
    for number, line in enumerate(lines, 1):
        if not _blank(line) and _indent(line) < base:
            raise FrontmatterError(f"line {number}: less indented than the first key")
    return [line[base:] if line.startswith(" " * base) else line.lstrip(" ") for line in lines]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _blank(line: str) -> bool:
    stripped = line.strip(" \t")
    return not stripped or stripped.startswith("#")


class _Reader:
    """A block mapping at indent 0, one key at a time."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.at = 0

    def mapping(self) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        while self.at < len(self.lines):
            line = self.lines[self.at]
            if _blank(line):
                self.at += 1
                continue
            if line.startswith(("%", "&", "*", "!", "? ", "---", "...")):
                raise FrontmatterError(f"line {self.at + 1}: YAML construct not read: {line!r}")
            if _indent(line) or line.startswith("\t"):
                raise FrontmatterError(f"line {self.at + 1}: unexpected indentation")
            if line.startswith(("- ", "[", "{")) or line == "-":
                return {}  # a list or a flow collection: not a mapping, no fields
            match = _KEY.match(line)
            if match is None:
                if ":" not in line and self._only_scalar():
                    return {}
                raise self._error("not a key: value line")
            key = match.group(1).rstrip()
            if key in fields:
                raise self._error(f"duplicate key {key!r}")
            self.at += 1
            fields[key] = self.value(match.group(2) or "")
        return fields

    def _only_scalar(self) -> bool:
        """The whole document is one plain scalar (pi reads it, and finds no fields)."""
        return all(":" not in line or _blank(line) for line in self.lines)

    def _error(self, why: str) -> FrontmatterError:
        return FrontmatterError(f"line {self.at + 1}: {why}")

    def _continuation(self) -> list[str]:
        """The following lines that belong to the value: indented, blank, or comments."""
        taken: list[str] = []
        while self.at < len(self.lines):
            line = self.lines[self.at]
            if line.strip(" \t") and _indent(line) == 0 and not line.startswith("\t"):
                break
            taken.append(line)
            self.at += 1
        while taken and not taken[-1].strip(" \t"):
            taken.pop()
        return taken

    def value(self, raw: str) -> Any:
        raw = raw.rstrip(" \t")
        if raw.startswith(("&", "*", "!", "%", "@", "`")):
            raise self._error(f"YAML construct not read: {raw!r}")
        if raw.startswith('"'):
            return self._quoted(raw, '"')
        if raw.startswith("'"):
            return self._quoted(raw, "'")
        header = _BLOCK_HEADER.match(raw)
        if header is not None:
            return self._block(header)
        if raw.startswith(("[", "{")):
            self._continuation()
            return NOT_TEXT
        if not raw or raw.startswith("#"):
            rest = [line for line in self._continuation() if not _blank(line)]
            return NOT_TEXT if rest else None
        return self._plain(raw)

    def _plain(self, first: str) -> Any:
        parts = [_plain_part(first, self.at)]
        blank_run = 0
        for line in self._continuation():
            if _blank(line) and not line.strip(" \t"):
                blank_run += 1
                continue
            if line.lstrip(" \t").startswith("#"):
                raise self._error("a comment inside a plain scalar")
            part = _plain_part(line.strip(" \t"), self.at)
            parts.append("\n" * blank_run if blank_run else " ")
            parts.append(part)
            blank_run = 0
        text = "".join(parts)
        if len(parts) == 1:
            return _resolve(text)
        return text

    def _quoted(self, raw: str, quote: str) -> str:
        pieces = [raw[1:]]
        rest = self._continuation()
        text = raw[1:]
        # Find the closing quote across the value's lines.
        for line in [None, *rest]:
            if line is not None:
                pieces.append(line)
                text = "\n".join(pieces)
            end = _closing_quote(text, quote)
            if end is not None:
                tail = text[end + 1 :].strip(" \t\n")
                if tail and not tail.startswith("#"):
                    raise self._error("text after a quoted scalar")
                return _unquote(text[:end], quote)
        raise self._error("a quoted scalar is not closed")

    def _block(self, header: re.Match[str]) -> str:
        style, chomp = header.group(1), header.group(2) or header.group(4)
        lines = self._continuation_block()
        indent = int(header.group(3)) if header.group(3) else None
        if indent is None:
            content = [line for line in lines if line.strip(" ")]
            indent = min((_indent(line) for line in content), default=0)
        body = [line[indent:] if line.strip(" ") else "" for line in lines]
        text = "\n".join(body) if style == "|" else _fold(body)
        stripped = text.rstrip("\n")
        trailing = len(text) - len(stripped)
        if chomp == "-" or not stripped:
            return stripped if stripped else ""
        if chomp == "+":
            return stripped + "\n" * (trailing + 1)
        return stripped + "\n"

    def _continuation_block(self) -> list[str]:
        """A block scalar's lines: indented or blank (comments count as text there)."""
        taken: list[str] = []
        while self.at < len(self.lines):
            line = self.lines[self.at]
            if line.strip(" ") and _indent(line) == 0:
                break
            taken.append(line)
            self.at += 1
        return taken


def _plain_part(text: str, line: int) -> str:
    """One line of a plain scalar, without its comment; pi refuses ``": "`` in it."""
    comment = re.search(r"[ \t]#", text)
    if comment is not None:
        text = text[: comment.start()].rstrip(" \t")
    if ": " in text or text.endswith(":") or ":\t" in text:
        raise FrontmatterError(f"line {line}: a nested mapping in a plain scalar")
    return text


def _resolve(text: str) -> Any:
    """A one-line plain scalar as YAML 1.2's core schema reads it."""
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if text in ("null", "Null", "NULL", "~", ""):
        return None
    if _INT.match(text) or _FLOAT.match(text):
        return NOT_TEXT
    return text


def _closing_quote(text: str, quote: str) -> int | None:
    at = 0
    while at < len(text):
        char = text[at]
        if quote == '"' and char == "\\":
            at += 2
            continue
        if char == quote:
            if quote == "'" and text[at + 1 : at + 2] == "'":
                at += 2
                continue
            return at
        at += 1
    return None


def _fold_lines(text: str) -> str:
    """Line breaks inside a quoted scalar: one becomes a space, n+1 become n newlines."""
    lines = [line.strip(" \t") for line in text.split("\n")]
    if len(lines) == 1:
        return text
    out = [text.split("\n")[0].rstrip(" \t")]
    blanks = 0
    for line in lines[1:]:
        if not line:
            blanks += 1
            continue
        out.append("\n" * blanks if blanks else " ")
        out.append(line)
        blanks = 0
    if blanks:
        out.append("\n" * blanks)
    return "".join(out)


def _unquote(text: str, quote: str) -> str:
    if quote == "'":
        return _fold_lines(text).replace("''", "'")
    result: list[str] = []
    at = 0
    folded = _fold_lines(text)
    while at < len(folded):
        char = folded[at]
        if char != "\\":
            result.append(char)
            at += 1
            continue
        code = folded[at + 1 : at + 2]
        if code in _ESCAPES:
            result.append(_ESCAPES[code])
            at += 2
        elif code in ("x", "u", "U"):
            width = {"x": 2, "u": 4, "U": 8}[code]
            digits = folded[at + 2 : at + 2 + width]
            if len(digits) != width or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise FrontmatterError(f"a bad escape \\{code}{digits}")
            result.append(chr(int(digits, 16)))
            at += 2 + width
        else:
            raise FrontmatterError(f"a bad escape \\{code}")
    return "".join(result)


def _fold(lines: list[str]) -> str:
    """A ``>`` block's lines folded: a single break between two text lines is a space;
    lines more indented than the block keep their breaks."""
    out: list[str] = []
    previous_text = False
    blanks = 0
    for line in lines:
        if not line:
            blanks += 1
            continue
        more = line.startswith((" ", "\t"))
        if out:
            if previous_text and not more and not blanks:
                out.append(" ")
            else:
                out.append("\n" * (blanks + (0 if previous_text and not more else 1)))
        out.append(line)
        previous_text = not more
        blanks = 0
    return "".join(out) + ("\n" * (blanks + 1) if out else "")
