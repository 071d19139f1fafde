"""``read`` of images against pi 1.6.0's read tool itself (issue 42): the same files,
the same answers — note, image type and bytes — for the images both send as they are
and for files that only look like images."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import trio

from tests.test_coding_read_images import GIF, WEBP, png
from trio_session import ImageContent, TextContent, ToolOutput, coding_tools

HERE = Path(__file__).resolve().parent

FILES = {
    "a.png": png(3, 2),
    "a.gif": GIF,
    "a.webp": WEBP,
    "no-extension": png(1, 1),
    "named.png": b"just text\n",
    "animated.png": png(2, 2, animated=True),
}


def pis(pi16_package: Path, node22: Path, cwd: Path) -> dict[str, list[dict[str, str]]]:
    """pi 1.6.0's read tool's content for each file."""
    command = [str(node22), str(HERE / "read16.mjs"), str(pi16_package), str(cwd), *FILES]
    done = subprocess.run(command, capture_output=True, check=True, timeout=120)
    return {path: answer["content"] for path, answer in json.loads(done.stdout).items()}


def ours(cwd: Path) -> dict[str, list[dict[str, str]]]:
    """Our read tool's content for each file, in pi's JSON shape."""
    (tool,) = coding_tools(cwd, ["read"])

    async def each() -> dict[str, list[dict[str, str]]]:
        answers = {}
        for path in FILES:
            result = await tool.execute({"path": path})
            output = ToolOutput((TextContent(result),)) if isinstance(result, str) else result
            answers[path] = [
                {"type": "text", "text": p.text}
                if isinstance(p, TextContent)
                else {"type": "image", "data": p.data, "mimeType": p.mime_type}
                for p in output.content
                if isinstance(p, (TextContent, ImageContent))
            ]
        return answers

    return trio.run(each)


def test_read_answers_images_as_pi(pi16_package: Path, node22: Path, tmp_path: Path) -> None:
    """Each file's answer from our read equals pi 1.6.0's."""
    for name, data in FILES.items():
        (tmp_path / name).write_bytes(data)
    theirs = pis(pi16_package, node22, tmp_path)
    assert theirs["a.png"][0] == {"type": "text", "text": "Read image file [image/png]"}
    assert ours(tmp_path) == theirs
