"""Bytes from a terminal in raw mode → key presses. Pure: no I/O, no Trio.

``KeyDecoder.feed`` takes whatever ``os.read`` returned and gives back every key
that is complete; what is left (half an escape sequence, half a UTF-8 character,
an unfinished bracketed paste) waits for the next feed. A lone ESC byte is
ambiguous — the Esc key, or the start of an arrow key whose other bytes are still
on the way — so the reader waits ``ESC_TIMEOUT`` seconds while
``waiting_for_escape`` is true and then calls ``flush``.

What the bytes mean (raw mode with ICRNL off, so Enter is CR):

```text
\\r                          enter
\\n (Ctrl+J), ESC \\r, ESC \\n  newline (and Shift/Alt/Ctrl+Enter as
CSI 13;<mod> u, CSI 27;<mod>;13 ~)
\\x7f, \\x08                  backspace        CSI 3 ~         delete
\\t                          tab              ESC ESC         esc, then go on
CSI/SS3 A B C D             up down right left
CSI 1;5 D, CSI 1;3 D, ESC b  word_left        (…C, ESC f: word_right)
CSI H, SS3 H, CSI 1~, 7~, ^A home             CSI F, SS3 F, 4~, 8~, ^E  end
CSI 5 ~, CSI 6 ~            page_up, page_down
^C ^D ^U ^K ^W ^L           ctrl_c ctrl_d ctrl_u ctrl_k ctrl_w ctrl_l
ESC \\x7f (Alt+Backspace)    ctrl_w
^O ^G ^Y, ESC y             ctrl_o ctrl_g ctrl_y alt_y
^_ (Ctrl+_, Ctrl+-)         undo             (and CSI 45;5 u, CSI 95;5 u)
CSI 200 ~ … CSI 201 ~       one "paste" key with the whole block
```

Anything else — other C0 bytes, unknown sequences — is ``Key("other", raw)``.
A run of printable text in one feed is one ``"char"`` key.
"""

from __future__ import annotations

import codecs
import re

import attrs

from .._core.classes import define, frozen

ESC_TIMEOUT = 0.05
"""Seconds to wait after a lone ESC byte before it counts as the Esc key."""

KEY_NAMES: frozenset[str] = frozenset(
    {
        "char",
        "paste",
        "enter",
        "newline",
        "backspace",
        "delete",
        "tab",
        "esc",
        "up",
        "down",
        "left",
        "right",
        "home",
        "end",
        "word_left",
        "word_right",
        "page_up",
        "page_down",
        "ctrl_c",
        "ctrl_d",
        "ctrl_u",
        "ctrl_k",
        "ctrl_w",
        "ctrl_l",
        "ctrl_o",
        "ctrl_g",
        "ctrl_y",
        "alt_y",
        "undo",
        "other",
    }
)

PASTE_START = b"\x1b[200~"
PASTE_END = b"\x1b[201~"
_ESC = 0x1B
_MAX_SEQUENCE = 64  # an escape sequence longer than this is not one: "other"
TAB_SPACES = "    "


def _check_name(_instance: object, _attribute: object, value: str) -> None:
    if value not in KEY_NAMES:
        msg = f"unknown key name {value!r} (one of {', '.join(sorted(KEY_NAMES))})"
        raise ValueError(msg)


@frozen
class Key:
    """One key press.

    ``text`` is the typed text for ``"char"``, the whole pasted block for
    ``"paste"``, and the raw bytes (as text) for ``"other"``; empty otherwise.
    """

    name: str = attrs.field(validator=_check_name)
    text: str = ""


# ESC sequences inside pasted text: CSI, OSC (ended by BEL or ST), other two-byte ones.
_PASTE_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[ -~]?"
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean_text(text: str) -> str:
    """Text as the editor keeps it: no control characters but ``"\\n"``.

    CRLF and CR become ``"\\n"``, a tab becomes four spaces, escape sequences
    and the other C0/C1 control characters (and DEL) are dropped.
    """
    if text.isprintable():  # the common case: nothing to do
        return text
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\t", TAB_SPACES)
    text = _PASTE_SEQUENCE.sub("", text)
    return _CONTROLS.sub("", text)


_C0_KEYS: dict[int, str] = {
    0x0D: "enter",
    0x0A: "newline",
    0x7F: "backspace",
    0x08: "backspace",
    0x09: "tab",
    0x01: "home",
    0x05: "end",
    0x03: "ctrl_c",
    0x04: "ctrl_d",
    0x15: "ctrl_u",
    0x0B: "ctrl_k",
    0x17: "ctrl_w",
    0x0C: "ctrl_l",
    0x0F: "ctrl_o",
    0x07: "ctrl_g",
    0x19: "ctrl_y",
    0x1F: "undo",  # Ctrl+_ and, on most terminals, Ctrl+-
}

# ESC + one byte (Alt+key).
_ALT_KEYS: dict[int, str] = {
    0x0D: "newline",
    0x0A: "newline",
    0x7F: "ctrl_w",
    0x08: "ctrl_w",
    ord("b"): "word_left",
    ord("f"): "word_right",
    ord("y"): "alt_y",
}

_SS3_KEYS: dict[int, str] = {
    ord("A"): "up",
    ord("B"): "down",
    ord("C"): "right",
    ord("D"): "left",
    ord("H"): "home",
    ord("F"): "end",
}

# CSI <number> ~
_TILDE_KEYS: dict[str, str] = {
    "1": "home",
    "7": "home",
    "4": "end",
    "8": "end",
    "3": "delete",
    "5": "page_up",
    "6": "page_down",
}

# CSI <codepoint>;<modifiers> u with Ctrl held (kitty keyboard protocol).
_CTRL_LETTERS: dict[str, str] = {
    "a": "home",
    "e": "end",
    "c": "ctrl_c",
    "d": "ctrl_d",
    "u": "ctrl_u",
    "k": "ctrl_k",
    "w": "ctrl_w",
    "l": "ctrl_l",
    "j": "newline",
    "o": "ctrl_o",
    "g": "ctrl_g",
    "y": "ctrl_y",
    "-": "undo",
    "_": "undo",
}

_SHIFT, _ALT, _CTRL = 1, 2, 4


def _modifiers(field: str) -> int:
    """Modifier bits of a CSI parameter (``1 + bits``; ``"3"`` is Alt)."""
    try:
        return max(0, int(field.split(":")[0]) - 1)
    except ValueError:
        return 0


def _raw(data: bytes | bytearray) -> str:
    return bytes(data).decode("utf-8", "backslashreplace")


def _csi_key(params: str, final: str) -> str | None:
    """The key of ``ESC [ params final``, or None for an unknown one."""
    fields = params.split(";") if params else []
    mods = _modifiers(fields[1]) if len(fields) > 1 else 0
    if final in "ABCD":
        base = {"A": "up", "B": "down", "C": "right", "D": "left"}[final]
        if final in "CD" and mods & (_ALT | _CTRL):
            return "word_right" if final == "C" else "word_left"
        return base
    if final == "H":
        return "home"
    if final == "F":
        return "end"
    if final == "~" and fields:
        if fields[0] == "27" and len(fields) == 3:  # xterm modifyOtherKeys: 27;mod;code~
            code, mods = fields[2], _modifiers(fields[1])
            return _codepoint_key(code, mods)
        return _TILDE_KEYS.get(fields[0])
    if final == "u" and fields:
        return _codepoint_key(fields[0].split(":")[0], mods)
    return None


def _codepoint_key(code: str, mods: int) -> str | None:
    """A key reported by its Unicode code point (CSI-u, modifyOtherKeys)."""
    if not code.isdigit():
        return None
    number = int(code)
    if number == 13:
        return "newline" if mods else "enter"
    if number == 27:
        return "esc"
    if number == 9:
        return "tab"
    if number in (127, 8):
        return "ctrl_w" if mods & (_ALT | _CTRL) else "backspace"
    if mods & _CTRL and not mods & _ALT and 0 <= number < 0x110000:
        return _CTRL_LETTERS.get(chr(number).lower())
    return None


@define(eq=False)
class KeyDecoder:
    """Turns the bytes a terminal sends into ``Key`` values, across reads."""

    _pending: bytearray = attrs.field(factory=bytearray, init=False)
    _utf8: codecs.IncrementalDecoder = attrs.field(
        factory=lambda: codecs.getincrementaldecoder("utf-8")("replace"), init=False
    )
    # Inside a bracketed paste: the raw bytes so far (None outside one).
    _paste: bytearray | None = attrs.field(default=None, init=False)

    @property
    def waiting_for_escape(self) -> bool:
        """True when what is pending is a lone ESC (Esc, or an unfinished sequence)."""
        return self._paste is None and self._pending == b"\x1b"

    @property
    def in_paste(self) -> bool:
        """True between the start and the end marker of a bracketed paste."""
        return self._paste is not None

    def feed(self, data: bytes) -> list[Key]:
        """Every key completed by ``data`` (with what was pending), in order."""
        keys: list[Key] = []
        if self._paste is not None:
            self._feed_paste(data, keys)
        else:
            self._pending += data
        self._decode(keys)
        return keys

    def flush(self) -> list[Key]:
        """The ESC timeout passed: a lone ESC is Esc, an unfinished sequence "other".

        Inside a bracketed paste nothing is flushed: the paste goes on until its
        end marker, however long that takes.
        """
        if self._paste is not None or not self._pending.startswith(b"\x1b"):
            return []
        keys: list[Key] = []
        if self._pending == b"\x1b":
            keys.append(Key("esc"))
        else:
            keys.append(Key("other", _raw(self._pending)))
        self._pending.clear()
        return keys

    # -- internals --------------------------------------------------------------

    def _emit_text(self, keys: list[Key], text: str) -> None:
        text = _CONTROLS.sub("", text)  # C1 controls decoded from the bytes
        if not text:
            return
        if keys and keys[-1].name == "char":
            keys[-1] = Key("char", keys[-1].text + text)
        else:
            keys.append(Key("char", text))

    def _end_text(self, keys: list[Key]) -> None:
        """A control byte ends the text: a half UTF-8 character before it is U+FFFD."""
        self._emit_text(keys, self._utf8.decode(b"", final=True))
        self._utf8.reset()

    def _decode(self, keys: list[Key]) -> None:
        data = self._pending
        while data and self._paste is None:
            first = data[0]
            if first == _ESC:
                if not self._escape(keys):
                    return  # an unfinished sequence: wait for more bytes
            elif first < 0x20 or first == 0x7F:
                self._end_text(keys)
                del data[0]
                name = _C0_KEYS.get(first)
                keys.append(Key(name) if name else Key("other", chr(first)))
            else:
                end = 1
                while end < len(data) and data[end] >= 0x20 and data[end] not in (0x7F, _ESC):
                    end += 1
                self._emit_text(keys, self._utf8.decode(bytes(data[:end])))
                del data[:end]

    def _escape(self, keys: list[Key]) -> bool:
        """Decode the sequence at the start of ``_pending``; False if it is unfinished."""
        data = self._pending
        self._end_text(keys)  # ESC ends the text before it, even a half character
        if len(data) == 1:
            return False
        second = data[1]
        if second == _ESC:  # ESC ESC: the first is Esc; the second starts anew
            del data[0]
            keys.append(Key("esc"))
            return True
        if second == ord("["):
            return self._csi(keys)
        if second == ord("O"):
            if len(data) < 3:
                return False
            name = _SS3_KEYS.get(data[2])
            keys.append(Key(name) if name else Key("other", _raw(data[:3])))
            del data[:3]
            return True
        if second in _ALT_KEYS:
            keys.append(Key(_ALT_KEYS[second]))
            del data[:2]
            return True
        if second < 0x80:  # Alt + some other key
            keys.append(Key("other", _raw(data[:2])))
            del data[:2]
            return True
        keys.append(Key("other", "\x1b"))  # Alt + a non-ASCII key: the text goes on
        del data[0]
        return True

    def _csi(self, keys: list[Key]) -> bool:
        data = self._pending
        limit = min(len(data), 2 + _MAX_SEQUENCE)
        end = 2
        while end < limit and 0x20 <= data[end] <= 0x3F:  # parameter/intermediate bytes
            end += 1
        if end == 2 + _MAX_SEQUENCE:  # no final byte in sight: not a sequence
            keys.append(Key("other", _raw(data[:end])))
            del data[:end]
            return True
        if end == len(data):
            return False  # the rest is on the way
        final = data[end]
        if not 0x40 <= final <= 0x7E:  # broken off by a control byte or text
            keys.append(Key("other", _raw(data[:end])))
            del data[:end]
            return True
        sequence = bytes(data[: end + 1])
        del data[: end + 1]
        if sequence == PASTE_START:
            self._paste = bytearray()
            rest = bytes(data)
            data.clear()
            self._feed_paste(rest, keys)
            return True
        params = sequence[2:-1].decode("ascii")
        name = _csi_key(params, chr(final))
        keys.append(Key(name) if name else Key("other", _raw(sequence)))
        return True

    def _feed_paste(self, data: bytes, keys: list[Key]) -> None:
        paste = self._paste
        assert paste is not None
        start = max(0, len(paste) - len(PASTE_END) + 1)  # the end marker may straddle feeds
        paste += data
        found = paste.find(PASTE_END, start)
        if found < 0:
            return
        text = bytes(paste[:found]).decode("utf-8", "replace")
        self._pending += paste[found + len(PASTE_END) :]
        self._paste = None
        keys.append(Key("paste", clean_text(text)))
