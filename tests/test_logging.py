"""Issue 14: the ``trio_session`` loggers report retries, compactions, credential
rotations and provider failures, with structured extras, and never an API key."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import pytest
import trio
import trio.testing

from trio_session import (
    DropOldestCompactor,
    FauxProvider,
    FauxReply,
    InMemoryCredentialStore,
    Model,
    OpenAIProvider,
    ProviderRequest,
    open_session,
)
from trio_session.store._credentials import redact

from .conftest import ERR_503, ERR_OVERFLOW, err, ok

COMMON = ("session_id", "provider", "model")


def records(caplog: pytest.LogCaptureFixture, name: str) -> list[logging.LogRecord]:
    """The captured records of one logger."""
    return [r for r in caplog.records if r.name == name]


def field(record: logging.LogRecord, name: str) -> Any:
    """One extra field of a record."""
    return getattr(record, name)


def extras(record: logging.LogRecord, *names: str) -> dict[str, Any]:
    """The named extra fields of a record."""
    return {name: getattr(record, name) for name in names}


async def run(
    script: Sequence[FauxReply | Any], text: str = "hi", **kwargs: Any
) -> tuple[FauxProvider, str]:
    """Prompt once over ``script``; return the provider and the session id."""
    provider = FauxProvider(script)
    async with open_session(provider, session_id="s-1", **kwargs) as session:
        await session.prompt(text)
        return provider, session.session_id


async def test_retry_lines_for_a_503_script(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Two 503s then an answer: two retry starts and one success, with their extras."""
    caplog.set_level(logging.INFO, logger="trio_session")
    await run([err(), err(), ok()])
    retry = records(caplog, "trio_session.retry")
    assert [(r.levelname, r.getMessage()) for r in retry] == [
        ("INFO", f"retry 1/3 in 2000 ms after: {ERR_503}"),
        ("INFO", f"retry 2/3 in 4000 ms after: {ERR_503}"),
        ("INFO", "retry succeeded on attempt 2"),
    ]
    start_fields = (*COMMON, "attempt", "max_attempts", "delay_ms", "error")
    assert [extras(r, *start_fields) for r in retry[:2]] == [
        {
            "session_id": "s-1",
            "provider": "faux",
            "model": "faux-model",
            "attempt": attempt,
            "max_attempts": 3,
            "delay_ms": delay,
            "error": ERR_503,
        }
        for attempt, delay in ((1, 2000), (2, 4000))
    ]
    assert extras(retry[2], *COMMON, "attempt", "success", "final_error") == {
        "session_id": "s-1",
        "provider": "faux",
        "model": "faux-model",
        "attempt": 2,
        "success": True,
        "final_error": None,
    }
    failures = records(caplog, "trio_session.provider")
    assert [(r.levelname, r.getMessage()) for r in failures] == [
        ("INFO", f"provider request failed (retryable): {ERR_503}")
    ] * 2
    assert extras(failures[0], "stop_reason", "error", "classification", "status") == {
        "stop_reason": "error",
        "error": ERR_503,
        "classification": "retryable",
        "status": 503,
    }
    assert field(failures[0], "error_class") == field(retry[0], "error_class")
    assert (field(retry[0], "status"), field(retry[0], "error_class")) == (503, "OverloadedError")
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_retry_over_the_maximum_is_a_warning(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """R-15: the final failure is the one WARNING, with final_error; a 400 is classed
    fatal."""
    caplog.set_level(logging.INFO, logger="trio_session")
    await run([err(), err(), err("400 Bad Request")], settings={"retry": {"maxRetries": 2}})
    end = records(caplog, "trio_session.retry")[-1]
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == [end]
    assert (end.levelname, end.getMessage()) == (
        "WARNING",
        "retry failed after 2 attempt(s): 400 Bad Request",
    )
    assert extras(end, "attempt", "success", "cancelled", "final_error") == {
        "attempt": 2,
        "success": False,
        "cancelled": False,
        "final_error": "400 Bad Request",
    }
    classes = [field(r, "classification") for r in records(caplog, "trio_session.provider")]
    assert classes == ["retryable", "retryable", "fatal"]


async def test_abort_retry_is_logged_as_cancelled(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """R-30: abort_retry() during the sleep logs the chain's end as cancelled, at INFO."""
    caplog.set_level(logging.INFO, logger="trio_session")
    async with open_session(FauxProvider([err(), ok()])) as session, trio.open_nursery() as n:
        n.start_soon(session.prompt, "hi")
        await trio.sleep(1)
        assert session.is_waiting_to_retry
        session.abort_retry()
    end = records(caplog, "trio_session.retry")[-1]
    assert (end.levelname, end.getMessage(), *extras(end, "final_error", "cancelled").values()) == (
        "INFO",
        "retry cancelled after 1 attempt(s)",
        "Retry cancelled",
        True,
    )
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_logging_off_makes_no_records(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """At WARNING a 503 that the retry made good leaves no record at all."""
    caplog.set_level(logging.WARNING, logger="trio_session")
    await run([err(), ok()])
    assert caplog.records == []


def _echo_key(request: ProviderRequest) -> FauxReply:
    """A provider that puts the key it was sent into its error text."""
    return err(f"503 upstream rejected Authorization: Bearer {request.api_key}")


SECRET = "sk-proj-0123456789abcdefSECRET"


async def test_no_key_in_any_record(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A key echoed by the provider appears in no record: message, args, extras, text."""
    caplog.set_level(logging.DEBUG, logger="trio_session")
    store = InMemoryCredentialStore(keys={"faux": [SECRET]}, clock=trio.current_time)
    provider = FauxProvider([_echo_key, _echo_key, ok()])
    async with open_session(provider, credentials=store) as session:
        await session.prompt("hi")
        assert [r.api_key for r in provider.requests] == [SECRET] * 3  # it was really sent
        # Any other code logging on the package's loggers is scrubbed too.
        logging.getLogger("trio_session").warning("echo %s", SECRET, extra={"key": SECRET})
        try:
            raise RuntimeError(f"bad key {SECRET}")
        except RuntimeError:
            logging.getLogger("trio_session.rpc").exception("failed")
    assert len(caplog.records) >= 7
    for record in caplog.records:
        assert SECRET not in record.getMessage()
        assert SECRET not in repr(record.args)
        assert all(SECRET not in repr(value) for value in vars(record).values())
    assert SECRET not in caplog.text
    safe = redact(SECRET)
    first = records(caplog, "trio_session.retry")[0]
    assert first.getMessage() == (
        f"retry 1/3 in 2000 ms after: 503 upstream rejected Authorization: Bearer {safe}"
    )
    assert field(first, "error").endswith(safe)
    assert "bad key sk-…CRET" in caplog.text


MODEL = Model(id="small", provider="faux", context_window=1000)


async def test_compaction_records(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """R-50: an overflow logs its failure as overflow, then compaction start and end."""
    caplog.set_level(logging.INFO, logger="trio_session")
    provider = FauxProvider([ok("a1"), err(ERR_OVERFLOW), ok("a2")])
    async with open_session(provider, MODEL, compactor=DropOldestCompactor()) as session:
        await session.prompt("q1")
        await session.prompt("q2")
    (failure,) = records(caplog, "trio_session.provider")
    assert field(failure, "classification") == "overflow"
    start, end = records(caplog, "trio_session.compaction")
    assert (start.levelname, start.getMessage(), field(start, "reason")) == (
        "INFO",
        "compaction started (overflow)",
        "overflow",
    )
    assert end.levelname == "INFO"
    before, after = field(end, "tokens_before"), field(end, "tokens_after")
    assert end.getMessage() == f"compaction done (overflow): {before} → {after} tokens"
    assert 0 < after < before
    fields = extras(end, "reason", "aborted", "will_retry", "error")
    assert fields == {"reason": "overflow", "aborted": False, "will_retry": True, "error": None}


class HangingCompactor:
    """A compactor that never finishes (until cancelled)."""

    async def compact(self, messages: Any, **kwargs: Any) -> None:
        await trio.sleep_forever()


async def test_aborted_compaction_is_info(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A manual compaction cut by abort() logs an INFO record with aborted: true: a
    cancellation is no warning."""
    caplog.set_level(logging.INFO, logger="trio_session")
    provider = FauxProvider([ok("a1")])
    async with open_session(provider, compactor=HangingCompactor()) as session:
        await session.prompt("q1")
        async with trio.open_nursery() as nursery:

            async def compact() -> None:
                with pytest.raises(Exception, match=r"^Compaction cancelled$"):
                    await session.compact()

            nursery.start_soon(compact)
            await trio.testing.wait_all_tasks_blocked()
            await session.abort()
    start, end = records(caplog, "trio_session.compaction")
    assert start.getMessage() == "compaction started (manual)"
    assert (end.levelname, end.getMessage(), *extras(end, "aborted", "tokens_before").values()) == (
        "INFO",
        "compaction aborted (manual)",
        True,
        None,
    )


USAGE_LIMIT = "429 usage_limit_reached: The usage limit has been reached\nretry-after: 600"


@pytest.mark.parametrize(
    ("keys", "level", "message"),
    [
        (["key-one", "key-two"], "INFO", "usage limit: switched faux to another credential"),
        (["only"], "WARNING", "usage limit: no other faux credential is free"),
    ],
)
async def test_credential_rotation_records(
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
    keys: list[str],
    level: str,
    message: str,
) -> None:
    """R-17: the store's answer is logged with rotated and retry_after_ms, never a key."""
    caplog.set_level(logging.INFO, logger="trio_session")
    store = InMemoryCredentialStore(keys={"faux": keys}, clock=trio.current_time)
    await run([err(USAGE_LIMIT), ok()], credentials=store)
    (record,) = records(caplog, "trio_session.credentials")
    assert (record.levelname, record.getMessage()) == (level, message)
    assert extras(record, *COMMON, "rotated", "retry_after_ms") == {
        "session_id": "s-1",
        "provider": "faux",
        "model": "faux-model",
        "rotated": level == "INFO",
        "retry_after_ms": 600_000,
    }
    assert not any(key in caplog.text for key in keys)


async def test_a_providers_own_key_is_scrubbed(caplog: pytest.LogCaptureFixture) -> None:
    """A provider configured with a key (no credential store): no record shows it."""
    caplog.set_level(logging.INFO, logger="trio_session")
    key = "sk-own-provider-key-0123456789"
    async with (
        OpenAIProvider(base_url="http://127.0.0.1:9/v1", api_key=key) as provider,
        open_session(provider, "gpt-test"),
    ):
        logging.getLogger("trio_session.provider").warning("sent %s", key)
    (record,) = caplog.records
    assert record.getMessage() == f"sent {redact(key)}"
    assert key not in caplog.text


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    """The WARNING (and worse) records: logger and message."""
    return [(r.name, r.getMessage()) for r in caplog.records if r.levelno >= logging.WARNING]


async def test_a_client_gone_mid_retry_is_no_warning(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A server's client disconnects (its scope is cancelled) during the backoff, and
    another mid-answer: INFO records only, the chain's end as cancelled."""
    caplog.set_level(logging.DEBUG, logger="trio_session")
    script = [err(), ok(), ok("partial", hang=True)]
    async with open_session(FauxProvider(script)) as session:
        with trio.move_on_after(1):
            async with session.stream("hi") as reply:
                _ = [piece async for piece in reply]
        await session.prompt("answered")
        with trio.move_on_after(1):
            async with session.stream("again") as reply:
                _ = [piece async for piece in reply]
    assert warnings_of(caplog) == []
    ends = [r.getMessage() for r in records(caplog, "trio_session.retry") if "after" in r.msg]
    assert ends[-1] == "retry cancelled after 1 attempt(s)"


@pytest.mark.parametrize(
    ("script", "settings", "expected"),
    [
        ([err("400 Bad Request")], {}, ("prompt failed (fatal): 400 Bad Request")),
        ([err()], {"retry": {"enabled": False}}, f"prompt failed (retryable): {ERR_503}"),
        ([err()] * 2, {"retry": {"maxRetries": 1}}, f"retry failed after 1 attempt(s): {ERR_503}"),
    ],
    ids=["fatal", "retries-off", "over-the-maximum"],
)
async def test_a_give_up_is_exactly_one_warning(
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
    script: list[FauxReply],
    settings: dict[str, Any],
    expected: str,
) -> None:
    """A prompt that ends in a failure nothing took up makes one WARNING, whichever way
    it gave up; the failed attempts before it are INFO."""
    caplog.set_level(logging.DEBUG, logger="trio_session")
    await run(script, settings=settings)
    ((_, message),) = warnings_of(caplog)
    assert message == expected
    failures = records(caplog, "trio_session.provider")
    assert [r.levelname for r in failures].count("INFO") == len(script)


async def test_every_record_is_one_line(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A provider error that quotes a header on a second line is logged on one line,
    escaped; the extra field keeps the raw text."""
    caplog.set_level(logging.DEBUG, logger="trio_session")
    store = InMemoryCredentialStore(keys={"faux": ["key-one"]}, clock=trio.current_time)
    await run([err(USAGE_LIMIT), err("503 down\r\nretry-after: 1"), ok()], credentials=store)
    logging.getLogger("trio_session.rpc").info("two\nlines")
    assert len(caplog.records) >= 6
    assert all("\n" not in r.getMessage() and "\r" not in r.getMessage() for r in caplog.records)
    retry = records(caplog, "trio_session.retry")
    assert retry[0].getMessage() == (
        "retry 1/3 in 2000 ms after: 429 usage_limit_reached: The usage limit has been "
        "reached\\nretry-after: 600"
    )
    assert field(retry[0], "error") == USAGE_LIMIT
    assert retry[1].getMessage().endswith("503 down\\nretry-after: 1")
    assert caplog.records[-1].getMessage() == "two\\nlines"
