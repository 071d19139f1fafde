"""Install the pinned reference pi for the interop tests, once per lock file.

``npm ci`` runs into ``${XDG_CACHE_HOME:-~/.cache}/trio-session/interop/<sha256 of
package-lock.json>/``: a new lock file gets a new directory, an unchanged one is reused
between runs (and between checkouts). The install goes to a temporary sibling first and
is renamed into place when complete, so an interrupted or concurrent install never
leaves a half-filled directory that a later run would trust.

Run as a script (``python tests/interop/install.py``) it installs and prints the path of
the ``pi-coding-agent`` package directory; ``.ci/run`` does that before pytest. The
tests' ``pi_package`` fixture calls ``ensure_pi_package`` itself.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOCK_FILE = HERE / "package-lock.json"
PACKAGE_FILE = HERE / "package.json"
PI_SUBDIR = Path("node_modules", "@mariozechner", "pi-coding-agent")
_DONE_MARKER = ".install-complete"


class InstallError(RuntimeError):
    """node or npm is missing, or ``npm ci`` failed: the message says which and why."""


def cache_root() -> Path:
    """``${XDG_CACHE_HOME:-~/.cache}/trio-session/interop``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "trio-session" / "interop"


def lock_digest() -> str:
    """The sha256 of the committed ``package-lock.json``: the cache key."""
    return hashlib.sha256(LOCK_FILE.read_bytes()).hexdigest()


def missing_tools() -> list[str]:
    """Which of ``node`` and ``npm`` are not on ``PATH``."""
    return [tool for tool in ("node", "npm") if shutil.which(tool) is None]


def ensure_pi_package() -> Path:
    """The installed ``node_modules/@mariozechner/pi-coding-agent`` directory.

    Installs with ``npm ci --ignore-scripts`` when this lock file's directory is not
    complete yet. Raises ``InstallError`` when node or npm is missing or npm fails.
    """
    target = cache_root() / lock_digest()
    if (target / _DONE_MARKER).is_file():
        return target / PI_SUBDIR
    missing = missing_tools()
    if missing:
        raise InstallError(f"{' and '.join(missing)} not found on PATH (install nodejs and npm)")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name[:12]}-", dir=target.parent))
    try:
        shutil.copy2(PACKAGE_FILE, staging / "package.json")
        shutil.copy2(LOCK_FILE, staging / "package-lock.json")
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
            raise InstallError(f"npm ci failed with exit status {result.returncode}: {tail}")
        if not (staging / PI_SUBDIR / "dist" / "cli.js").is_file():
            raise InstallError(f"npm ci finished but {PI_SUBDIR}/dist/cli.js is missing")
        (staging / _DONE_MARKER).write_text(lock_digest() + "\n")
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
    return target / PI_SUBDIR


def main() -> int:
    """Install (or find) the package and print its directory."""
    try:
        print(ensure_pi_package())
    except (InstallError, subprocess.TimeoutExpired) as error:
        print(f"interop install: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
