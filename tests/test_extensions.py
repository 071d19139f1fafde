"""Extensions see every event in order (R-44, R-45) and cannot break the session."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import trio
import trio.testing

from trio_session import (
    AutoRetryEnd,
    Extension,
    ExtensionAPI,
    ExtensionError,
    ExtensionLoadError,
    FauxProvider,
    SessionEvent,
    load_entry_point_extensions,
    load_extension_file,
    open_session,
)
from trio_session._core.codec import event_to_json
from trio_session._session.extensions import ENTRY_POINT_GROUP, _may_declare
from trio_session.testing import EventRecorder

from .conftest import assert_idle, err, ok

RECORDER = """
RECORDED = []

def activate(api):
    api.on("*", RECORDED.append)
"""


def write_extension(directory: Path, name: str, source: str) -> Path:
    path = directory / f"{name}.py"
    path.write_text(textwrap.dedent(source), encoding="utf-8")
    return path


def recorded(module_name: str) -> list[SessionEvent]:
    events: list[SessionEvent] = sys.modules[module_name].RECORDED
    return events


async def test_r44_file_extension_sees_what_subscribers_see(
    autojump_clock: trio.testing.MockClock, tmp_path: Path
) -> None:
    """R-44, R-45: an extension loaded from a file records the subscribe() stream exactly."""
    path = write_extension(tmp_path, "recorder", RECORDER)
    provider = FauxProvider([err(), err(), err(), err(), ok()])
    async with open_session(
        provider, settings={"retry": {"maxRetries": 2}}, extensions=[path]
    ) as session:
        rec = EventRecorder.attach(session)
        await session.prompt("exhaust")
        await session.prompt("again")
    events = recorded("trio_session_extension_recorder")
    assert events == rec.events
    ends = [e for e in events if isinstance(e, AutoRetryEnd)]
    assert [(e.success, e.attempt, e.final_error) for e in ends] == [
        (False, 2, "503 Service Unavailable"),
        (True, 1, None),
    ]


async def test_r44_entry_point_extension(
    autojump_clock: trio.testing.MockClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """R-44: an extension installed under the trio_session.extensions entry point loads."""
    write_extension(tmp_path, "ep_recorder", RECORDER)
    info = tmp_path / "ep_recorder-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ep-recorder\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[trio_session.extensions]\nrecorder = ep_recorder\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    extensions = load_entry_point_extensions()
    assert [e.name for e in extensions] == ["recorder"]
    provider = FauxProvider([err(), ok()])
    async with open_session(provider, extensions=extensions) as session:
        rec = EventRecorder.attach(session)
        await session.prompt("Hi")
    assert recorded("ep_recorder") == rec.events


@pytest.mark.parametrize("layout", ["dist-info", "egg-info", "egg"])
def test_entry_points_are_found_in_every_metadata_layout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout: str
) -> None:
    """Issue 15: the quick look that spares importing ``importlib.metadata`` when no
    distribution declares an extension still finds one in each layout it reads."""
    write_extension(tmp_path, "ep_layout", RECORDER)
    meta = {
        "dist-info": tmp_path / "ep_layout-1.0.dist-info",
        "egg-info": tmp_path / "ep_layout-1.0.egg-info",
        "egg": tmp_path / "ep_layout-1.0.egg" / "EGG-INFO",
    }[layout]
    meta.mkdir(parents=True)
    (meta / "entry_points.txt").write_text("[trio_session.extensions]\nlayout = ep_layout\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert _may_declare(ENTRY_POINT_GROUP)
    assert not _may_declare("trio_session.no_such_group")


def test_no_declared_extension_spares_importlib_metadata(tmp_path: Path) -> None:
    """Issue 15: with no distribution declaring ``trio_session.extensions``, loading the
    entry-point extensions finds none without importing ``importlib.metadata`` (tens of
    milliseconds of ``trio-session rpc``'s start-up)."""
    code = (
        "import sys\n"
        "from trio_session._session.extensions import load_entry_point_extensions\n"
        "assert 'importlib.metadata' not in sys.modules, 'imported before the call'\n"
        "assert load_entry_point_extensions() == []\n"
        "print('importlib.metadata' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert out.stdout.strip() == "False"


async def test_raising_and_hanging_extensions_are_reported(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A handler that raises or hangs yields extension_error; the session is unaffected."""
    seen: list[str] = []

    def activate(api: ExtensionAPI) -> None:
        def explode(event: SessionEvent) -> None:
            raise ValueError("bad handler")

        async def hang(event: SessionEvent) -> None:
            await trio.sleep_forever()

        async def note(event: SessionEvent) -> None:
            seen.append(f"{event.type}@{trio.current_time()}")

        api.on("auto_retry_start", explode)
        api.on("agent_start", hang)
        api.on("auto_retry_end", note)

    provider = FauxProvider([err(), ok()])
    async with open_session(
        provider, extensions=[Extension("flaky", activate)], extension_timeout=1.0
    ) as session:
        rec = EventRecorder.attach(session)
        reply = await session.prompt("Hi")
        assert (reply.text, trio.current_time()) == ("Hello", 2.0)  # not delayed by extensions
    errors = rec.of(ExtensionError)
    assert errors == [
        ExtensionError("flaky", "agent_start", "handler did not finish within 1.0 s"),
        ExtensionError("flaky", "auto_retry_start", "ValueError: bad handler"),
        ExtensionError("flaky", "agent_start", "handler did not finish within 1.0 s"),
    ]
    # each hang costs the extension task its bound, in event order, never the session
    assert seen == ["auto_retry_end@3.0"]


async def test_abort_is_not_held_up_by_extensions(autojump_clock: trio.testing.MockClock) -> None:
    """R-34: abort() returns at once while a handler hangs; the end event still arrives."""
    ends: list[tuple[AutoRetryEnd, float]] = []

    def activate(api: ExtensionAPI) -> None:
        async def slow(event: SessionEvent) -> None:
            await trio.sleep(3)

        def record(event: SessionEvent) -> None:
            assert isinstance(event, AutoRetryEnd)
            ends.append((event, trio.current_time()))

        api.on("auto_retry_start", slow)
        api.on("auto_retry_end", record)

    provider = FauxProvider([err(), ok()])
    async with (
        open_session(
            provider, extensions=[Extension("slow", activate)], extension_timeout=10
        ) as session,
        trio.open_nursery() as nursery,
    ):
        nursery.start_soon(session.prompt, "Hi")
        await trio.sleep(1)
        await session.abort()
        assert trio.current_time() == 1.0
        assert_idle(session)
    assert ends == [(AutoRetryEnd(False, 1, "Retry cancelled"), 3.0)]


async def test_queued_events_delivered_when_the_block_is_cancelled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """R-34: leaving open_session by cancellation still hands queued events to extensions."""
    got: list[str] = []

    def activate(api: ExtensionAPI) -> None:
        async def slow(event: SessionEvent) -> None:
            await trio.sleep(0.5)
            got.append(event.type)

        api.on("*", slow)

    provider = FauxProvider([err(), ok()])
    with trio.move_on_after(1):
        async with open_session(provider, extensions=[Extension("slow", activate)]) as session:
            await session.prompt("Hi")
    assert got[-2:] == ["auto_retry_end", "agent_settled"]
    assert got.count("auto_retry_start") == 1


async def test_extension_load_errors(tmp_path: Path) -> None:
    """Missing files, import errors and a missing activate() are clear ExtensionLoadErrors."""
    missing = tmp_path / "nope.py"
    with pytest.raises(ExtensionLoadError, match=rf"^extension file {missing} does not exist$"):
        load_extension_file(missing)
    broken = write_extension(tmp_path, "broken", "import no_such_module_xyz\n")
    with pytest.raises(
        ExtensionLoadError,
        match=rf"^extension file {broken} failed to import: "
        r"ModuleNotFoundError: No module named 'no_such_module_xyz'$",
    ):
        load_extension_file(broken)
    inert = write_extension(tmp_path, "inert", "X = 1\n")
    with pytest.raises(
        ExtensionLoadError, match=r"^extension inert has no activate\(api\) function$"
    ):
        load_extension_file(inert)


async def test_activate_failure_is_reported(autojump_clock: trio.testing.MockClock) -> None:
    """An activate() that raises stops open_session with a clear error, not a group."""

    def activate(api: ExtensionAPI) -> None:
        raise RuntimeError("no config")

    with pytest.raises(
        ExtensionLoadError, match=r"^extension bad failed to activate: RuntimeError: no config$"
    ):
        async with open_session(FauxProvider([]), extensions=[Extension("bad", activate)]):
            pass  # pragma: no cover


async def test_user_exception_in_the_block_is_not_wrapped(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """open_session lets the block's own exception out as itself."""
    with pytest.raises(KeyError, match="mine"):
        async with open_session(FauxProvider([]), extensions=[Extension("x", lambda api: None)]):
            raise KeyError("mine")


async def test_extension_error_names_the_extension_file_as_pi(tmp_path: Path) -> None:
    """An extension_error says ``extensionPath``, the extension's file, as pi's (issue 41,
    row 6); an extension given as a function is named by its name."""
    source = tmp_path / "loud.py"
    source.write_text(
        "def activate(api):\n"
        "    def explode(event):\n"
        "        raise ValueError('bad handler')\n"
        "    api.on('agent_start', explode)\n"
    )
    extension = load_extension_file(source)
    async with open_session(FauxProvider([ok()]), extensions=[extension]) as session:
        rec = EventRecorder.attach(session)
        await session.prompt("Hi")
    (error,) = rec.of(ExtensionError)
    assert event_to_json(error) == {
        "type": "extension_error",
        "extensionPath": str(source.resolve()),
        "event": "agent_start",
        "error": "ValueError: bad handler",
    }
    assert error.extension == str(source.resolve())
