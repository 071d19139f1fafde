"""``read`` of an image, as pi 1.6.0's: known by its first bytes, sent as an image part
beside ``Read image file [type]``, or pi's note when it would have to be shrunk or
converted (we have no image library); the model is then sent the image."""

from __future__ import annotations

import base64
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

from trio_session import (
    FauxProvider,
    FauxReply,
    ImageContent,
    TextContent,
    ToolCall,
    ToolOutput,
    ToolResultMessage,
    coding_tools,
    open_session,
)
from trio_session._coding_tools._image import MAX_BASE64, image_size, image_type

GIF = base64.b64decode("R0lGODlhAQABAIAAAP///wAAACH5BAEAAAAALAAAAAABAAEAAAICRAEAOw==")
WEBP = base64.b64decode("UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA==")


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png(width: int, height: int, *, animated: bool = False) -> bytes:
    """A real RGB PNG of that size."""
    rows = b"".join(b"\0" + b"\x80\x40\x20" * width for _ in range(height))
    header = _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    actl = _chunk(b"acTL", struct.pack(">II", 1, 0)) if animated else b""
    body = _chunk(b"IDAT", zlib.compress(rows)) + _chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + header + actl + body


def jpeg_header(width: int, height: int) -> bytes:
    """The start of a baseline JPEG: SOI, an APP0 segment, a SOF0 giving the size."""
    app0 = b"\xff\xe0" + struct.pack(">H", 16) + b"JFIF\0\x01\x01\0\0\x01\0\x01\0\0"
    sof0 = b"\xff\xc0" + struct.pack(">HBHHB", 11, 8, height, width, 1) + b"\x01\x11\0"
    return b"\xff\xd8" + app0 + sof0 + b"\xff\xd9"


def bmp() -> bytes:
    """A 1×1 24-bit BMP."""
    pixels = b"\0\0\xff\0"
    info = struct.pack("<IiiHHIIiiII", 40, 1, 1, 1, 24, 0, len(pixels), 0, 0, 0, 0)
    size = 14 + len(info) + len(pixels)
    return b"BM" + struct.pack("<IHHI", size, 0, 0, 14 + len(info)) + info + pixels


async def read(cwd: Path, path: str) -> Any:
    """What ``read`` answers for ``path``."""
    (tool,) = coding_tools(cwd, ["read"])
    return await tool.execute({"path": path})


@pytest.mark.parametrize(
    ("name", "data", "mime_type"),
    [
        ("a.png", png(3, 2), "image/png"),
        ("a.gif", GIF, "image/gif"),
        ("a.webp", WEBP, "image/webp"),
        ("photo.jpg", jpeg_header(640, 480), "image/jpeg"),
        ("no-extension", png(1, 1), "image/png"),
    ],
)
async def test_an_image_is_sent_as_an_image(
    tmp_path: Path, name: str, data: bytes, mime_type: str
) -> None:
    """An image by its bytes (not its name) comes back as pi's note and the image."""
    (tmp_path / name).write_bytes(data)
    assert await read(tmp_path, name) == ToolOutput(
        (
            TextContent(f"Read image file [{mime_type}]"),
            ImageContent(base64.b64encode(data).decode(), mime_type),
        )
    )


@pytest.mark.parametrize(
    ("data", "mime_type", "note"),
    [
        (png(2001, 1), "image/png", "could not be resized below the inline image size limit"),
        (
            jpeg_header(1, 2400),
            "image/jpeg",
            "could not be resized below the inline image size limit",
        ),
        (bmp(), "image/bmp", "could not be converted to a supported inline image format"),
    ],
)
async def test_an_image_to_shrink_or_convert_is_left_out(
    tmp_path: Path, data: bytes, mime_type: str, note: str
) -> None:
    """Past 2000 pixels a side, or a BMP: pi's note that the image was left out, no image."""
    (tmp_path / "big").write_bytes(data)
    assert await read(tmp_path, "big") == ToolOutput(
        (TextContent(f"Read image file [{mime_type}]\n[Image omitted: {note}.]"),)
    )


async def test_an_image_too_large_to_send_is_left_out(tmp_path: Path) -> None:
    """An image whose base64 text would reach 4.5 MB is left out, as pi leaves it."""
    data = png(4, 4) + b"\0" * (MAX_BASE64 // 4 * 3)
    (tmp_path / "huge.png").write_bytes(data)
    result = await read(tmp_path, "huge.png")
    assert result.content == (
        TextContent(
            "Read image file [image/png]\n"
            "[Image omitted: could not be resized below the inline image size limit.]"
        ),
    )


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("named.png", b"just text\n"),
        ("animated.png", png(2, 2, animated=True)),
        ("jpeg-ls.jpg", b"\xff\xd8\xff\xf7" + b"\0" * 20),
    ],
)
async def test_what_is_not_such_an_image_is_read_as_text(
    tmp_path: Path, name: str, data: bytes
) -> None:
    """A text file named .png, an animated PNG, a JPEG-LS: read as text, as pi reads them."""
    (tmp_path / name).write_bytes(data)
    assert await read(tmp_path, name) == data.decode("utf-8", errors="replace")


def test_sizes_come_from_the_headers() -> None:
    """Width and height from a PNG, GIF, WebP and JPEG header; None for a damaged one."""
    assert image_size(png(3, 2), "image/png") == (3, 2)
    assert image_size(GIF, "image/gif") == (1, 1)
    assert image_size(WEBP, "image/webp") == (1, 1)
    assert image_size(jpeg_header(640, 480), "image/jpeg") == (640, 480)
    assert image_size(b"\xff\xd8\xff", "image/jpeg") is None
    assert image_size(b"\x89PNG", "image/png") is None
    assert image_type(bmp()) == "image/bmp"
    assert image_type(b"BM" + b"\0" * 30) is None


async def test_the_model_is_sent_the_image(tmp_path: Path) -> None:
    """Through a session: the tool result keeps the image part, in the history and in
    what the next request carries."""
    (tmp_path / "a.png").write_bytes(png(3, 2))
    provider = FauxProvider(
        [FauxReply(tool_calls=[ToolCall("c1", "read", {"path": "a.png"})]), FauxReply(text="a dot")]
    )
    async with open_session(provider, tools=coding_tools(tmp_path, ["read"])) as session:
        await session.prompt("what is in a.png?")
        history = session.history
    (result,) = [m for m in history if isinstance(m, ToolResultMessage)]
    image = ImageContent(base64.b64encode(png(3, 2)).decode(), "image/png")
    assert result.content == (TextContent("Read image file [image/png]"), image)
    assert not result.is_error
    sent = [m for m in provider.requests[1].messages if isinstance(m, ToolResultMessage)]
    assert sent == [result]
