"""The package as a user installs it: ``python -m build`` makes an sdist and a wheel from it,
and the wheel holds the library, its ``py.typed`` marker and its metadata — and no tests."""

from __future__ import annotations

import email.message
import email.parser
import email.policy
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
