"""The package as a user installs it: ``python -m build`` makes an sdist and a wheel from it,
and the wheel holds the library, its ``py.typed`` marker and its metadata — and no tests."""

from __future__ import annotations

import email.message
import email.parser
import email.policy
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import trio_session

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sdist and wheel, built as ``python -m build`` does: the wheel from the sdist.

    ``--no-isolation`` builds with the hatchling of this environment (the test extra
    installs it), so the test needs no index.
    """
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return out


def _one(dist: Path, pattern: str) -> Path:
    (found,) = dist.glob(pattern)
    return found


def _metadata(wheel: zipfile.ZipFile) -> email.message.Message:
    (name,) = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
    return email.parser.Parser(policy=email.policy.compat32).parsestr(
        wheel.read(name).decode("utf-8")
    )


def test_wheel_holds_the_library_and_py_typed_but_no_tests(dist: Path) -> None:
    """Every module of trio_session is in the wheel, with py.typed; nothing else is."""
    wheel = zipfile.ZipFile(_one(dist, "*.whl"))
    names = set(wheel.namelist())
    source = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "trio_session").rglob("*")
        if path.is_file() and path.suffix in (".py", ".typed") and "__pycache__" not in path.parts
    }
    assert "trio_session/py.typed" in source
    assert source <= names
    packaged = {n for n in names if ".dist-info/" not in n}
    assert packaged == source
    assert not any(n.startswith(("tests/", "docs/", "benchmarks/")) for n in names)
    assert not any(n.endswith(".pyc") for n in names)
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


def test_wheel_metadata_has_one_version_and_says_what_the_package_is(dist: Path) -> None:
    """The version is trio_session.__version__ (its one source); classifiers and extras
    are there, and no project URL nobody has checked."""
    wheel = zipfile.ZipFile(_one(dist, "*.whl"))
    meta = _metadata(wheel)
    assert meta["Name"] == "trio-session"
    assert meta["Version"] == trio_session.__version__
    assert meta["Requires-Python"] == ">=3.11"
    assert meta["License-Expression"] == "MIT"
    classifiers = meta.get_all("Classifier") or []
    for wanted in (
        "Framework :: Trio",
        "Typing :: Typed",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Programming Language :: Python :: 3.13",
    ):
        assert wanted in classifiers
    extras = set(meta.get_all("Provides-Extra") or [])
    assert {"test", "docs", "lint", "otel", "redis"} <= extras
    # No project URL until the repository has a public address someone has checked.
    assert meta.get_all("Project-URL") is None
    requires = meta.get_all("Requires-Dist") or []
    runtime = sorted(r.split(">=")[0] for r in requires if "extra ==" not in r)
    assert runtime == ["attrs", "httpx", "rich", "trio", "wcwidth"]
    # The README's test command installs every tool the suite runs (the type check too).
    for tool in ("pytest", "pyright", "twine", "build", "vulture"):
        assert any(
            r.startswith(f"{tool}>=") and r.endswith(("extra == 'test'", 'extra == "test"'))
            for r in requires
        ), tool
    (entry_points,) = [n for n in wheel.namelist() if n.endswith("entry_points.txt")]
    assert "trio-session = trio_session.cli:main" in wheel.read(entry_points).decode()


def test_sdist_carries_the_license_tests_and_docs_but_no_local_state(dist: Path) -> None:
    """The sdist is enough to run the tests from; it holds no venv, site or caches."""
    with tarfile.open(_one(dist, "*.tar.gz")) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert {"LICENSE", "README.md", "pyproject.toml", "mkdocs.yml"} <= names
    assert "trio_session/py.typed" in names
    assert "tests/conftest.py" in names
    assert "docs/index.md" in names
    assert not any(
        part in (".venv", "site", "__pycache__", "node_modules", ".git")
        for name in names
        for part in name.split("/")
    )


def test_twine_check_passes_on_the_sdist_and_the_wheel(dist: Path) -> None:
    """``twine check`` (what PyPI would refuse: metadata, the README as the description)
    passes for both files ``python -m build`` made."""
    files = sorted(str(path) for path in dist.iterdir())
    assert len(files) == 2
    result = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *files],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("PASSED") == 2


@pytest.fixture(scope="module")
def installed(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv (no site packages) with the wheel installed by pip, its dependencies
    from the package index as a user's would come; the venv's ``bin`` directory."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    bin_dir = venv / "bin"
    # pip is not ours to hold to the suite's -W error (Python 3.13's CI run sets
    # PYTHONWARNINGS=error and PYTHONDEVMODE): its own deprecation warnings would fail it.
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONWARNINGS", "PYTHONDEVMODE")}
    pip = subprocess.run(
        [str(bin_dir / "python"), "-m", "pip", "install", "--quiet", str(_one(dist, "*.whl"))],
        check=False,
        capture_output=True,
        text=True,
        env=environ,
        timeout=600,
    )
    assert pip.returncode == 0, pip.stderr
    return bin_dir


def test_the_installed_wheel_runs_the_demo_without_a_terminal(
    installed: Path, tmp_path: Path
) -> None:
    """``trio-session demo`` from the wheel in a fresh venv, stdin and stdout not a
    terminal: it prints the story as lines — two 503s, the retries, the answer — and
    exits 0. The package it runs is the venv's, not this checkout's."""
    environ = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    environ["PATH"] = f"{installed}{os.pathsep}{environ.get('PATH', '')}"
    where = subprocess.run(
        [str(installed / "python"), "-c", "import trio_session; print(trio_session.__file__)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environ,
        timeout=60,
        check=True,
    ).stdout.strip()
    assert Path(where).is_relative_to(installed.parent), where
    result = subprocess.run(
        [str(installed / "trio-session"), "demo"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=environ,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    lines = result.stdout.splitlines()
    assert "you: Say hello, and tell me what just happened." in lines
    assert (
        lines.count("  ✗ error: 503 Service Unavailable: the server is temporarily overloaded") == 2
    )
    assert "  ↻ retrying (1/3) in 2s…" in lines
    assert "  ↻ retrying (2/3) in 4s…" in lines
    assert lines[-1] == "  ✓ retry succeeded on attempt 2"
