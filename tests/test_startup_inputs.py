"""Start-up input errors are one line and exit 2, whatever the field (issue 39, F8).

``--credentials redis://u:p@host:notaport/0``, an unclosed IPv6 bracket, a
``sessionDir`` of ``~nosuchuser/x`` or with a NUL: each was a traceback and exit 1.
Every path and URL flag and setting is driven here with hostile values, in process
(a NUL cannot be in a real argv; the settings file can hold one); one real process
runs the issue's own line. No error line holds a URL's password.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from trio_session.cli._main import main
from trio_session.cli._setup import _system_prompt
from trio_session.rpc._client import default_command

SECRET = "secretpw"
URL_ROOT = "https://api.example.com/v1 or http://127.0.0.1:8080/v1"
NUL = "a\0b"
NO_USER = "~nosuchuser/x"

#: ``(flag, value, the error line after "trio-session: ")`` for the URL flags.
URL_ROWS = [
    (
        "--credentials",
        f"redis://u:{SECRET}@host:notaport/0",
        "not a usable Redis URL 'redis://u:…@host:notaport/0': "
        "Port could not be cast to integer value as 'notaport'",
    ),
    (
        "--credentials",
        f"redis://u:{SECRET}@[::1/0",
        "not a usable Redis URL 'redis://u:…@[::1/0': Invalid IPv6 URL",
    ),
    (
        "--credentials",
        f"rediss://u:{SECRET}@host:99999/0",
        "not a usable Redis URL 'rediss://u:…@host:99999/0': Port out of range 0-65535",
    ),
    (
        "--credentials",
        f"redis://u:{SECRET}@host/0\0",
        "not a usable Redis URL 'redis://u:…@host/0\\x00': it contains a NUL character",
    ),
    (
        "--base-url",
        f"http://u:{SECRET}@[::1/v1",
        "--base-url 'http://u:[redacted]@[::1/v1' is not a URL; "
        f"give the API root, like {URL_ROOT}",
    ),
    (
        "--base-url",
        "http://127.0.0.1:99999/v1",
        "--base-url 'http://127.0.0.1:99999/v1' has port 99999, past the last one (65535); "
        f"give the API root, like {URL_ROOT}",
    ),
]

#: The flags whose value is a path (``--session`` and ``--fork`` when it looks like one).
PATH_FLAGS = [
    "--agent-dir",
    "--api-key-file",
    "--faux",
    "--settings",
    "--extension",
    "--resume",
    "--session-dir",
    "--session",
    "--fork",
]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    status = main(argv)
    captured = capsys.readouterr()
    assert captured.out == ""
    return status, captured.err


@pytest.mark.parametrize("command", ["rpc", "chat"])
@pytest.mark.parametrize(("flag", "value", "error"), URL_ROWS)
def test_a_hostile_url_flag_is_one_line(
    command: str, flag: str, value: str, error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """F8: a URL flag with a bad port, an unclosed ``[`` or a NUL: one line, exit 2, and
    the password is not in it."""
    argv = [command, "--provider", "openai", "--no-session", flag, value]
    assert _run(argv, capsys) == (2, f"trio-session: {error}\n")


@pytest.mark.parametrize("command", ["rpc", "chat"])
@pytest.mark.parametrize("flag", PATH_FLAGS)
@pytest.mark.parametrize(
    ("value", "why"),
    [
        (NUL, "'a\\x00b': a path cannot contain a NUL character"),
        (NO_USER, f"{NO_USER}: cannot expand ~nosuchuser: no such user"),
    ],
    ids=["nul", "no-such-user"],
)
def test_a_hostile_path_flag_is_one_line(
    command: str, flag: str, value: str, why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """F8: every path flag with a NUL, or a ``~user`` of no user: one line naming the flag."""
    if flag in ("--session", "--fork") and value == NUL:
        value = f"dir/{NUL}"  # a path, not a session id
        why = "'dir/a\\x00b': a path cannot contain a NUL character"
    assert _run([command, "--provider", "faux", flag, value], capsys) == (
        2,
        f"trio-session: {flag} {why}\n",
    )


@pytest.mark.parametrize(
    ("settings", "error"),
    [
        (
            {"sessionDir": NUL},
            "sessionDir must be a non-empty path without a NUL character, or null, "
            "not 'a\\x00b' (in {path}); to start without this file, add --ignore-broken-settings",
        ),
        ({"sessionDir": NO_USER}, f"sessionDir {NO_USER}: cannot expand ~nosuchuser: no such user"),
        (
            {"credentials": {"url": f"redis://:{SECRET}@host:notaport/0"}},
            "not a usable Redis URL 'redis://:…@host:notaport/0': "
            "Port could not be cast to integer value as 'notaport'",
        ),
    ],
    ids=["session-dir-nul", "session-dir-no-user", "credentials-url-port"],
)
def test_a_hostile_setting_is_one_line(
    settings: dict[str, object], error: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """F8: a settings file's ``sessionDir`` with a NUL or of no user, or a credentials URL
    with a bad port: one line, exit 2."""
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(settings))
    script = tmp_path / "script.json"
    script.write_text("[]")
    argv = ["rpc", "--faux", str(script), "--settings", str(path)]
    assert _run(argv, capsys) == (2, f"trio-session: {error.format(path=path)}\n")


def test_an_agent_dir_variable_of_no_user_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """F8: ``$PI_CODING_AGENT_DIR`` of a ``~user`` that does not exist: one line, exit 2."""
    monkeypatch.setenv("PI_CODING_AGENT_DIR", NO_USER)
    assert _run(["rpc", "--provider", "faux"], capsys) == (
        2,
        f"trio-session: $PI_CODING_AGENT_DIR {NO_USER}: cannot expand ~nosuchuser: no such user\n",
    )


def test_a_system_prompt_that_cannot_be_a_file_is_text() -> None:
    """F8: ``--system-prompt`` is TEXT|FILE: a value no path can be is the text itself."""
    assert _system_prompt(NO_USER) == NO_USER
    assert _system_prompt(NUL) == NUL


def test_the_issue_credentials_line_in_a_real_process(tmp_path: Path) -> None:
    """F8: ``trio-session rpc --credentials redis://u:p@host:notaport/0``, the real command:
    one line on stderr, exit 2, nothing on stdout."""
    script = tmp_path / "script.json"
    script.write_text("[]")
    url = f"redis://u:{SECRET}@host:notaport/0"
    result = subprocess.run(
        default_command("--faux", str(script), "--credentials", url),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "trio-session: not a usable Redis URL 'redis://u:…@host:notaport/0': "
        "Port could not be cast to integer value as 'notaport'\n"
    )
