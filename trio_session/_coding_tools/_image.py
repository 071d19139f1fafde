"""Images ``read`` sends as images, as pi 1.6.0's read tool picks and checks them.

A file is an image by its first bytes (pi's ``detectSupportedImageMimeType``): JPEG
(not JPEG-LS), PNG (not animated), GIF, WebP, BMP — never by its name. pi sends one as
it is when it is at most 2000×2000 pixels and its base64 text under 4.5 MB; a larger
one it shrinks (Photon, a WebAssembly image library), and a BMP it converts to PNG.
We have no image library: those two answer with pi's own note for an image it could
not shrink or convert, and no image. The dimensions are read from the file's header.
"""

from __future__ import annotations

import base64
import struct

from .._core.classes import frozen
from .._core.messages import ImageContent, TextContent

#: How much of the file is looked at to know its type (pi's ``IMAGE_TYPE_SNIFF_BYTES``).
SNIFF_BYTES = 4100
#: The largest width and height sent as they are.
MAX_SIDE = 2000
#: The base64 size an image must stay under (pi's 4.5 MB).
MAX_BASE64 = int(4.5 * 1024 * 1024)

NOT_CONVERTED = "[Image omitted: could not be converted to a supported inline image format.]"
NOT_RESIZED = "[Image omitted: could not be resized below the inline image size limit.]"

_PNG = b"\x89PNG\r\n\x1a\n"


def image_type(head: bytes) -> str | None:
    """The MIME type of an image pi's ``read`` sends as one, from the file's first bytes;
    ``None`` for anything else."""
    if head.startswith(b"\xff\xd8\xff"):
        return None if head[3:4] == b"\xf7" else "image/jpeg"
    if head.startswith(_PNG):
        return "image/png" if _is_png(head) and not _animated_png(head) else None
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head[:2] == b"BM" and _is_bmp(head):
        return "image/bmp"
    return None


def _is_png(head: bytes) -> bool:
    return len(head) >= 16 and head[8:12] == b"\0\0\0\r" and head[12:16] == b"IHDR"


def _animated_png(head: bytes) -> bool:
    offset = len(_PNG)
    while offset + 8 <= len(head):
        (length,) = struct.unpack_from(">I", head, offset)
        kind = head[offset + 4 : offset + 8]
        if kind == b"acTL":
            return True
        if kind == b"IDAT":
            return False
        following = offset + 8 + length + 4
        if following > len(head):
            return False
        offset = following
    return False


def _is_bmp(head: bytes) -> bool:
    if len(head) < 26:
        return False
    size, _, pixels, header = struct.unpack_from("<IIII", head, 2)
    if size != 0 and size < 26:
        return False
    if pixels < 14 + header or (size != 0 and pixels >= size):
        return False
    if header == 12:
        planes, bits = struct.unpack_from("<HH", head, 22)
    elif 40 <= header <= 124 and len(head) >= 30:
        planes, bits = struct.unpack_from("<HH", head, 26)
    else:
        return False
    return planes == 1 and bits in (1, 4, 8, 16, 24, 32)


def image_size(data: bytes, mime_type: str) -> tuple[int, int] | None:
    """``(width, height)`` from the header of a PNG, GIF, JPEG or WebP; ``None`` when
    it cannot be read (a damaged file)."""
    try:
        if mime_type == "image/png":
            return struct.unpack_from(">II", data, 16)
        if mime_type == "image/gif":
            return struct.unpack_from("<HH", data, 6)
        if mime_type == "image/jpeg":
            return _jpeg_size(data)
        if mime_type == "image/webp":
            return _webp_size(data)
    except struct.error:
        return None
    return None


def _jpeg_size(data: bytes) -> tuple[int, int] | None:
    offset = 2
    while offset + 4 <= len(data):
        if data[offset] != 0xFF:
            return None
        marker = data[offset + 1]
        if marker == 0xFF:  # fill byte
            offset += 1
            continue
        (length,) = struct.unpack_from(">H", data, offset + 2)
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack_from(">HH", data, offset + 5)
            return width, height
        offset += 2 + length
    return None


def _webp_size(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8 ":
        width, height = struct.unpack_from("<HH", data, 26)
        return width & 0x3FFF, height & 0x3FFF
    if chunk == b"VP8L":
        (bits,) = struct.unpack_from("<I", data, 21)
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        width = int.from_bytes(data[24:27], "little") + 1
        height = int.from_bytes(data[27:30], "little") + 1
        return width, height
    return None


@frozen
class ImageRead:
    """What ``read`` answers for an image: its note, and the image when it can be sent."""

    note: str
    image: ImageContent | None

    @property
    def content(self) -> tuple[TextContent | ImageContent, ...]:
        """The result's parts: the note, then the image."""
        image = () if self.image is None else (self.image,)
        return (TextContent(self.note), *image)


def read_image(data: bytes, mime_type: str) -> ImageRead:
    """What pi's ``read`` answers for an image file's bytes (see the module docstring)."""
    if mime_type == "image/bmp":
        return ImageRead(f"Read image file [{mime_type}]\n{NOT_CONVERTED}", None)
    size = image_size(data, mime_type)
    encoded_size = (len(data) + 2) // 3 * 4
    if size is None or max(size) > MAX_SIDE or encoded_size >= MAX_BASE64:
        return ImageRead(f"Read image file [{mime_type}]\n{NOT_RESIZED}", None)
    encoded = base64.b64encode(data).decode("ascii")
    return ImageRead(f"Read image file [{mime_type}]", ImageContent(encoded, mime_type))
