"""KeyDecoder: the bytes a terminal sends → Key values (pure, no terminal)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trio_session.tui._keys import KEY_NAMES, Key, KeyDecoder, clean_text


def decode(*feeds: bytes) -> list[Key]:
    decoder = KeyDecoder()
    keys: list[Key] = []
    for data in feeds:
        keys += decoder.feed(data)
    return keys


def names(*feeds: bytes) -> list[str]:
    return [key.name for key in decode(*feeds)]


def test_printable_run_is_one_char_key() -> None:
    """A run of printable text in one feed is one "char" key."""
    assert decode(b"hello world") == [Key("char", "hello world")]


def test_text_and_arrows_interleave() -> None:
    """Text, then CSI arrows, then text: each run its own key, in order."""
    assert decode(b"hello\x1b[D\x1b[Dxy") == [
        Key("char", "hello"),
        Key("left"),
        Key("left"),
        Key("char", "xy"),
    ]


def test_utf8_split_across_feeds_is_joined() -> None:
    """A multi-byte character split over reads comes out whole."""
    data = "中é👩\u200d👩\u200d👧".encode()
    keys = decode(*(data[i : i + 1] for i in range(len(data))))
    assert "".join(key.text for key in keys) == "中é👩\u200d👩\u200d👧"
    assert {key.name for key in keys} == {"char"}


def test_invalid_utf8_becomes_replacement_character() -> None:
    """Bytes that are not UTF-8 become U+FFFD, and the text after them is kept."""
    assert decode(b"a\xffb") == [Key("char", "a\ufffdb")]
    assert decode(b"a\xe4\x1b[A") == [Key("char", "a\ufffd"), Key("up")]


@pytest.mark.parametrize(
    ("data", "name"),
    [
        (b"\r", "enter"),
        (b"\n", "newline"),
        (b"\x1b[13;2u", "newline"),
        (b"\x1b[27;2;13~", "newline"),
        (b"\x1b\r", "newline"),
        (b"\x1b\n", "newline"),
        (b"\x7f", "backspace"),
        (b"\x08", "backspace"),
        (b"\x1b[3~", "delete"),
        (b"\t", "tab"),
        (b"\x1b[A", "up"),
        (b"\x1b[B", "down"),
        (b"\x1b[C", "right"),
        (b"\x1b[D", "left"),
        (b"\x1bOA", "up"),
        (b"\x1bOB", "down"),
        (b"\x1bOC", "right"),
        (b"\x1bOD", "left"),
        (b"\x1b[1;5D", "word_left"),
        (b"\x1b[1;3D", "word_left"),
        (b"\x1b[1;5C", "word_right"),
        (b"\x1b[1;3C", "word_right"),
        (b"\x1bb", "word_left"),
        (b"\x1bf", "word_right"),
        (b"\x1b[1;2A", "up"),
        (b"\x1b[H", "home"),
        (b"\x1bOH", "home"),
        (b"\x1b[1~", "home"),
        (b"\x1b[7~", "home"),
        (b"\x01", "home"),
        (b"\x1b[F", "end"),
        (b"\x1bOF", "end"),
        (b"\x1b[4~", "end"),
        (b"\x1b[8~", "end"),
        (b"\x05", "end"),
        (b"\x1b[5~", "page_up"),
        (b"\x1b[6~", "page_down"),
        (b"\x03", "ctrl_c"),
        (b"\x04", "ctrl_d"),
        (b"\x15", "ctrl_u"),
        (b"\x0b", "ctrl_k"),
        (b"\x17", "ctrl_w"),
        (b"\x1b\x7f", "ctrl_w"),
        (b"\x0c", "ctrl_l"),
        (b"\x1b[13u", "enter"),
        (b"\x1b[99;5u", "ctrl_c"),
    ],
)
def test_sequence_maps_to_key(data: bytes, name: str) -> None:
    """Each documented byte sequence is its key, alone in the feed."""
    assert names(data) == [name]


@pytest.mark.parametrize(
    ("data", "name"),
    [
        (b"\x0f", "ctrl_o"),
        (b"\x1b[111;5u", "ctrl_o"),
        (b"\x07", "ctrl_g"),
        (b"\x1b[103;5u", "ctrl_g"),
        (b"\x19", "ctrl_y"),
        (b"\x1b[121;5u", "ctrl_y"),
        (b"\x1by", "alt_y"),
        (b"\x1f", "undo"),
        (b"\x1b[45;5u", "undo"),
        (b"\x1b[95;5u", "undo"),
    ],
)
def test_kill_ring_undo_editor_and_expand_keys(data: bytes, name: str) -> None:
    """Ctrl+O (expand tools), Ctrl+G (editor), Ctrl+Y / Alt+Y (yank), Ctrl+_ / Ctrl+- (undo)."""
    assert names(data) == [name]


@pytest.mark.parametrize(
    ("data", "raw"),
    [(b"\x1b[15~", "\x1b[15~"), (b"\x1bOP", "\x1bOP"), (b"\x02", "\x02"), (b"\x1bx", "\x1bx")],
)
def test_unknown_sequences_are_other_with_raw_text(data: bytes, raw: str) -> None:
    """F5, F1, Ctrl+B, Alt+x: "other", carrying the raw bytes."""
    assert decode(data) == [Key("other", raw)]


def test_lone_esc_waits_then_flushes_as_esc() -> None:
    """A lone ESC is pending until flush; then it is the Esc key."""
    decoder = KeyDecoder()
    assert decoder.feed(b"\x1b") == []
    assert decoder.waiting_for_escape
    assert decoder.flush() == [Key("esc")]
    assert not decoder.waiting_for_escape
    assert decoder.flush() == []


def test_esc_then_rest_of_sequence_in_next_feed_is_an_arrow() -> None:
    """ESC in one read and "[A" in the next make one up key."""
    decoder = KeyDecoder()
    assert decoder.feed(b"\x1b") == []
    assert decoder.feed(b"[") == []
    assert not decoder.waiting_for_escape
    assert decoder.feed(b"A") == [Key("up")]


def test_incomplete_sequence_flushes_as_other() -> None:
    """An unfinished CSI sequence flushed by the timeout is "other" with its bytes."""
    decoder = KeyDecoder()
    assert decoder.feed(b"\x1b[1;") == []
    assert decoder.flush() == [Key("other", "\x1b[1;")]
    assert decoder.feed(b"a") == [Key("char", "a")]


def test_double_esc_is_esc_then_goes_on() -> None:
    """ESC ESC is Esc, and decoding continues with what follows."""
    assert names(b"\x1b\x1b[A") == ["esc", "up"]
    assert names(b"\x1b\x1bx") == ["esc", "other"]


def test_bracketed_paste_of_three_lines_is_one_paste_key() -> None:
    """A 3-line bracketed paste is one "paste" key with CRLF/CR turned into "\\n"."""
    keys = decode(b"ab\x1b[200~one\r\ntwo\rthree\x1b[201~cd")
    assert keys == [Key("char", "ab"), Key("paste", "one\ntwo\nthree"), Key("char", "cd")]


def test_paste_cleans_tabs_controls_and_sequences() -> None:
    """In a paste: tab → 4 spaces; ESC sequences, C0/C1 controls dropped; bad UTF-8 → U+FFFD."""
    keys = decode(b"\x1b[200~a\tb\x1b[31mred\x1b[0m\x07\x00c\xffd\xc2\x9be\x1b]0;t\x07f\x1b[201~")
    assert keys == [Key("paste", "a    bredc\ufffddef")]


def test_paste_holds_keys_as_text() -> None:
    """Enter, Ctrl+C and arrows inside a paste are its text, not keys."""
    keys = decode(b"\x1b[200~x\r\x03y\x1b[Az\x1b[201~")
    assert keys == [Key("paste", "x\nyz")]


def test_megabyte_paste_in_4k_pieces_is_one_key() -> None:
    """A 1 MB paste fed 4 KB at a time is one paste key with every character."""
    line = "the quick brown fox 中文 👩\u200d👩\u200d👧 jumps\r\n"
    body = (line * (1_000_000 // len(line.encode()) + 1)).encode()[:1_000_000]
    body = body[: body.rfind(b"\n") + 1]
    data = b"\x1b[200~" + body + b"\x1b[201~" + b"after"
    decoder = KeyDecoder()
    keys: list[Key] = []
    for start in range(0, len(data), 4096):
        keys += decoder.feed(data[start : start + 4096])
        if start + 4096 < len(data) - 12:
            assert decoder.in_paste
            assert decoder.flush() == []  # the ESC timeout never ends a paste
    expected = body.decode().replace("\r\n", "\n")
    assert keys == [Key("paste", expected), Key("char", "after")]


@pytest.mark.parametrize("split", range(1, 6))
def test_paste_end_marker_split_across_feeds(split: int) -> None:
    """The end marker split anywhere over two feeds still ends the paste."""
    end = b"\x1b[201~"
    decoder = KeyDecoder()
    assert decoder.feed(b"\x1b[200~hello" + end[:split]) == []
    assert decoder.in_paste
    assert decoder.feed(end[split:] + b"!") == [Key("paste", "hello"), Key("char", "!")]


def test_paste_start_marker_split_across_feeds() -> None:
    """The start marker split over feeds still starts a paste."""
    assert decode(b"\x1b[20", b"0~a\rb", b"\x1b[201~") == [Key("paste", "a\nb")]


def test_key_rejects_unknown_name() -> None:
    """Key names are checked against KEY_NAMES."""
    with pytest.raises(ValueError, match=r"^unknown key name 'shift_f13' \(one of "):
        Key("shift_f13")
    assert "paste" in KEY_NAMES


def test_clean_text_keeps_newlines_and_printables() -> None:
    """clean_text leaves text and "\\n" alone and normalises line ends."""
    assert clean_text("a\r\nb\rc\nd") == "a\nb\nc\nd"
    assert clean_text("é中👩\u200d👩\u200d👧") == "é中👩\u200d👩\u200d👧"


@settings(deadline=None, max_examples=200)
@given(st.binary(max_size=200), st.lists(st.integers(min_value=1, max_value=16), max_size=30))
def test_any_bytes_any_split_same_keys(data: bytes, cuts: list[int]) -> None:
    """However the bytes are split into reads, the keys (after a flush) are the same."""
    whole = KeyDecoder()
    expected = whole.feed(data) + whole.flush()
    pieces, start = [], 0
    for cut in cuts:
        pieces.append(data[start : start + cut])
        start += cut
    pieces.append(data[start:])
    split = KeyDecoder()
    keys: list[Key] = []
    for piece in pieces:
        keys += split.feed(piece)
    keys += split.flush()

    def merged(keys: list[Key]) -> list[Key]:
        out: list[Key] = []
        for key in keys:
            if out and key.name == "char" and out[-1].name == "char":
                out[-1] = Key("char", out[-1].text + key.text)
            else:
                out.append(key)
        return out

    assert merged(keys) == merged(expected)


@settings(deadline=None, max_examples=200)
@given(st.text(max_size=300))
def test_any_pasted_text_survives(text: str) -> None:
    """Any text pasted comes back as clean_text of it: nothing printable is lost."""
    data = b"\x1b[200~" + text.encode("utf-8", "replace") + b"\x1b[201~"
    keys = decode(data)
    if "\x1b[201~" in text:
        return  # the text itself holds the end marker
    assert keys == [Key("paste", clean_text(text.encode("utf-8", "replace").decode()))]


def test_overlong_sequence_is_other_then_text() -> None:
    """A CSI with no final byte within 64 parameter bytes is "other"; what follows is text."""
    params = b"1;" * 40
    keys = decode(b"\x1b[" + params[:20], params[20:] + b"x")
    assert keys[0] == Key("other", "\x1b[" + params[:64].decode())
    assert keys[1:] == [Key("char", params[64:].decode() + "x")]
