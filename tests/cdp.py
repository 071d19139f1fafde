"""A small client for Chromium's DevTools protocol, for opening pages in tests.

Chromium started with ``--remote-debugging-pipe`` reads commands on its fd 3 and writes
replies and events on its fd 4, each message one JSON object ended by a NUL byte. That
is all this speaks: no websocket, no new dependency. ``Chromium.open_page(url)`` loads a
page in a fresh tab and reports what went wrong there — uncaught exceptions,
``console.error`` calls, error log entries (a failed resource load is one), requests that
failed or answered 400 or more.

Requests to any host but the loopback one are refused by the browser's resolver
(``--host-resolver-rules``), so a page behaves the same with or without a network; they
are reported apart, as ``external``, not as errors.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

import attrs

#: Where Debian (and the CI image, after ``apt-get install chromium``) puts it.
CANDIDATES = ("chromium", "chromium-browser", "google-chrome")

Message = dict[str, Any]

#: Runs in the child: fds argv[1] and argv[2] become 3 and 4, then it execs argv[3:].
TRAMPOLINE = """
import os, sys
os.dup2(int(sys.argv[1]), 3)
os.dup2(int(sys.argv[2]), 4)
os.close(int(sys.argv[1]))
os.close(int(sys.argv[2]))
os.execv(sys.argv[3], sys.argv[3:])
"""


def find_chromium() -> str | None:
    """The path of a Chromium on ``PATH``, or None."""
    for name in CANDIDATES:
        path = shutil.which(name)
        if path is not None:
            return path
    return None


class CdpError(Exception):
    """The browser answered a command with an error, went away, or took too long."""


@attrs.frozen
class PageReport:
    """What loading one page showed.

    Attributes:
        url: The page's address.
        errors: One line per problem: ``exception: …``, ``console.error: …``,
            ``log error: …``, ``failed request: …``, ``HTTP 404: …``.
        requested: Addresses not on another host that the page or a worker of it asked
            for (its own host's, ``data:``).
        external: Addresses on other hosts the page asked for, which were not loaded.
        probe: The value of the ``probe`` expression, evaluated once the page loaded
            (None without one).
    """

    url: str
    errors: tuple[str, ...]
    requested: tuple[str, ...]
    external: tuple[str, ...]
    probe: Any = None


@attrs.define(eq=False)
class _Page:
    """The events of one tab (and of the workers it starts), as they arrive."""

    host: str
    sessions: set[str]
    loaded: bool = False
    in_flight: dict[str, str] = attrs.Factory(dict)
    urls: dict[str, str] = attrs.Factory(dict)
    errors: list[str] = attrs.Factory(list)
    external: list[str] = attrs.Factory(list)

    def is_external(self, url: str) -> bool:
        parts = urlsplit(url)
        return parts.scheme in {"http", "https", "ws", "wss"} and parts.netloc != self.host


class Chromium:
    """One headless Chromium, spoken to over its DevTools pipe.

    Use as a context manager; leaving it closes the browser (``Browser.close``, then a
    kill of its process group if it has not gone within ``timeout``).
    """

    def __init__(self, executable: str, profile: Path, *, timeout: float = 120.0) -> None:
        self.timeout = timeout
        self._next_id = 0
        self._messages: queue.Queue[Message | None] = queue.Queue()
        self._handlers: list[Callable[[Message], None]] = []
        # The browser's ends go to fds of 10 or more first, so that they cannot already
        # be 3 or 4; a tiny Python trampoline moves them to 3 and 4, then becomes chromium.
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        child_in = fcntl.fcntl(to_child_r, fcntl.F_DUPFD_CLOEXEC, 10)
        child_out = fcntl.fcntl(from_child_w, fcntl.F_DUPFD_CLOEXEC, 10)
        for fd in (to_child_r, from_child_w):
            os.close(fd)
        flags = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            # Every name resolves to nothing but the loopback address: no request leaves
            # the machine, with or without a network.
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            f"--user-data-dir={profile}",
            "--remote-debugging-pipe",
            "about:blank",
        ]
        self.process = subprocess.Popen(
            [sys.executable, "-c", TRAMPOLINE, str(child_in), str(child_out), executable, *flags],
            pass_fds=(child_in, child_out),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        os.close(child_in)
        os.close(child_out)
        self._reader = threading.Thread(target=self._read, name="cdp-reader", daemon=True)
        self._reader.start()

    def __enter__(self) -> Chromium:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _read(self) -> None:
        """Split the browser's output into messages (runs in a thread until EOF)."""
        buffer = b""
        while chunk := os.read(self._from_child, 1 << 16):
            buffer += chunk
            *complete, buffer = buffer.split(b"\0")
            for raw in complete:
                self._messages.put(json.loads(raw))
        self._messages.put(None)

    def _send(self, method: str, params: Message | None, session_id: str | None) -> int:
        self._next_id += 1
        message: Message = {"id": self._next_id, "method": method, "params": params or {}}
        if session_id is not None:
            message["sessionId"] = session_id
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._to_child, data) :]
        return self._next_id

    def _pump(self, deadline: float, what: str) -> Message:
        """The next message from the browser; events go to the handlers first."""
        remaining = deadline - time.monotonic()
        try:
            message = self._messages.get(timeout=max(remaining, 0.0))
        except queue.Empty:
            raise CdpError(f"no answer from chromium within {self.timeout} s ({what})") from None
        if message is None:
            raise CdpError(f"chromium closed its pipe ({what})")
        if "method" in message:
            for handler in self._handlers:
                handler(message)
        return message

    def call(
        self, method: str, params: Message | None = None, session: str | None = None
    ) -> Message:
        """Send one command and wait for its result (events meanwhile go to handlers)."""
        sent = self._send(method, params, session)
        deadline = time.monotonic() + self.timeout
        while True:
            message = self._pump(deadline, method)
            if message.get("id") == sent:
                if "error" in message:
                    raise CdpError(f"{method}: {message['error'].get('message')}")
                result: Message = message.get("result", {})
                return result

    def wait_until(self, condition: Callable[[], bool], what: str) -> None:
        """Handle events until ``condition()`` holds (or fail after ``timeout``)."""
        deadline = time.monotonic() + self.timeout
        while not condition():
            self._pump(deadline, what)

    def open_page(
        self, url: str, *, probe: str | None = None, width: int = 1440, height: int = 900
    ) -> PageReport:
        """Load ``url`` in a new ``width``×``height`` tab; wait for its load event and for
        its requests to end, then evaluate ``probe`` (a JavaScript expression whose value
        is JSON) in it.

        Dedicated workers the page starts are attached too, so their exceptions and
        failed requests count.
        """
        page = _Page(host=urlsplit(url).netloc, sessions=set())
        value: Any = None
        self._handlers.append(lambda message: self._record(page, message))
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        try:
            attached = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})
            session: str = attached["sessionId"]
            page.sessions.add(session)
            self._instrument(session, page=True)
            metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
            self.call("Emulation.setDeviceMetricsOverride", metrics, session)
            navigated = self.call("Page.navigate", {"url": url}, session)
            if "errorText" in navigated:
                page.errors.append(f"navigation failed: {navigated['errorText']} ({url})")
            else:
                self._settle(page, url)
                if probe is not None:
                    evaluated = self.call(
                        "Runtime.evaluate", {"expression": probe, "returnByValue": True}, session
                    )
                    if "exceptionDetails" in evaluated:
                        raise CdpError(f"the probe failed: {evaluated['exceptionDetails']}")
                    value = evaluated["result"].get("value")
        finally:
            self._handlers.pop()
            self.call("Target.closeTarget", {"targetId": target})
        return PageReport(
            url=url,
            errors=tuple(page.errors),
            requested=tuple(page.urls.values()),
            external=tuple(page.external),
            probe=value,
        )

    def _settle(self, page: _Page, url: str) -> None:
        """Wait for the load event and for every request to end; then make a round trip
        to the page and each of its workers (each runs what it queued first) and wait
        again, until a round trip turns up no new request."""
        while True:
            self.wait_until(lambda: page.loaded and not page.in_flight, f"loading {url}")
            seen = len(page.urls) + len(page.external)
            for session in list(page.sessions):
                try:
                    self.call("Runtime.evaluate", {"expression": "0"}, session)
                except CdpError:
                    page.sessions.discard(session)  # a worker that has ended
            if len(page.urls) + len(page.external) == seen and not page.in_flight:
                return

    def _instrument(self, session: str, *, page: bool) -> None:
        """Turn on the domains whose events make the report (commands not awaited)."""
        domains = ["Runtime", "Log", "Network"] + (["Page"] if page else [])
        for domain in domains:
            self._send(f"{domain}.enable", None, session)
        auto = {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": True}
        self._send("Target.setAutoAttach", auto, session)
        if page:
            # The page's own domains must be on before it navigates: wait for the last.
            self.call("Runtime.runIfWaitingForDebugger", None, session)
        else:
            self._send("Runtime.runIfWaitingForDebugger", None, session)

    def _record(self, page: _Page, message: Message) -> None:
        """Note one event of the page (or of one of its workers)."""
        method: str = message["method"]
        params: Message = message.get("params", {})
        if method == "Target.attachedToTarget" and message.get("sessionId") in page.sessions:
            page.sessions.add(params["sessionId"])
            self._instrument(params["sessionId"], page=False)
            return
        if message.get("sessionId") not in page.sessions:
            return
        if method == "Page.loadEventFired":
            page.loaded = True
        elif method == "Network.requestWillBeSent":
            request_url = params["request"]["url"]
            if page.is_external(request_url):
                page.external.append(request_url)
            else:
                page.urls[params["requestId"]] = request_url
                page.in_flight[params["requestId"]] = request_url
        elif method == "Network.responseReceived":
            response = params["response"]
            if response["status"] >= 400:
                page.errors.append(f"HTTP {response['status']}: {response['url']}")
        elif method == "Network.loadingFinished":
            page.in_flight.pop(params["requestId"], None)
        elif method == "Network.loadingFailed":
            request_url = page.in_flight.pop(params["requestId"], None)
            if request_url is not None and not params.get("canceled"):
                page.errors.append(f"failed request: {params['errorText']} ({request_url})")
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            description = details.get("exception", {}).get("description") or details["text"]
            page.errors.append(f"exception: {description} ({details.get('url', '?')})")
        elif method == "Runtime.consoleAPICalled" and params["type"] in {"error", "assert"}:
            text = " ".join(str(arg.get("value", arg.get("description"))) for arg in params["args"])
            page.errors.append(f"console.{params['type']}: {text}")
        elif method == "Log.entryAdded" and params["entry"]["level"] == "error":
            entry = params["entry"]
            if page.is_external(entry.get("url", "")):
                return  # the refusal of an external request: listed in ``external``
            page.errors.append(f"log error: {entry['text']} ({entry.get('url', '?')})")

    def close(self) -> None:
        """Close the browser and wait for it; kill its process group if it lingers."""
        if self.process.poll() is None:
            try:
                self._send("Browser.close", None, None)
                self.process.wait(timeout=self.timeout)
            except (OSError, subprocess.TimeoutExpired):
                self._kill_group()
                self.process.wait()
        os.close(self._to_child)
        self._reader.join(timeout=self.timeout)
        if self._reader.is_alive():  # a helper process of the browser holds its pipe
            self._kill_group()
            self._reader.join()
        os.close(self._from_child)

    def _kill_group(self) -> None:
        """SIGKILL the process group the browser leads (it was started in its own)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
