"""Start-up: ``import trio_session`` against ``import trio``, and ``trio-session rpc``
spawned to its first answer against pi 0.73.1 doing the same.

Run from the repository root::

    python benchmarks/startup.py            # 20 imports of each, 10 spawns of each
    python benchmarks/startup.py --quick    # 5 imports, 2 spawns: proves it runs

**import.time.** Fresh interpreters, one after another and alternating: ``python -c
"import trio"``, then ``python -c "import trio_session"`` (the bytecode compiled first,
whatever ``PYTHONDONTWRITEBYTECODE`` says, and a first run of each not counted). Each
sample is the wall time from ``Popen`` to the exit, so Python's own start-up (``python -c
pass``, shown beside) is in both. The figure is the median of trio_session's over the
median of trio's. Shown beside, not judged: ``from trio_session import open_session,
FauxProvider, Model`` (what a program that runs a session imports) and the ``rpc``
package.

**rpc.spawn.** ``Popen`` → the line answering ``{"id": "s", "type": "get_state"}``
(written at once, so it waits in the pipe) has been read. Both agents get the same
isolated ``HOME`` and the same pi agent directory (a ``models.json`` defining one
OpenAI-compatible model at an unused loopback URL: nothing is requested, and a
``settings.json``), and the same arguments: ``node <pi>/dist/cli.js --mode rpc
--provider interop --model interop-small`` and ``python -m trio_session rpc
--agent-dir DIR --provider interop --model interop-small``, each keeping a session
file as it does by default. Spawns alternate. Shown beside: the floor, a trio child
that answers the same line with a fixed line (Python start-up, ``import trio``,
``trio.run``, the pipes); for the start-up over HTTP, a trio child that reads the prompt,
imports httpx, streams the same reply from the same server and writes one line. For
``import.session`` the floor beside it is ``import trio`` with the standard library any
session needs (``json``, ``uuid``, ``datetime``). Without node or pi (``$PI_PACKAGE``, default
``/tmp/pi/node_modules/@mariozechner/pi-coding-agent``) the figure is NaN, "skipped".
"""

from __future__ import annotations

import argparse
import json
import math
import os
import selectors
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _bench import machine_info
from _goals import Figure, chunked, pairs_ratio
from _loopback import LoopbackOpenAI

REPO = Path(__file__).resolve().parent.parent
DEFAULT_PI = Path("/tmp/pi/node_modules/@mariozechner/pi-coding-agent")
PROVIDER = "interop"
MODEL = "interop-small"
#: Nothing listens there: the model is defined, never called.
UNUSED_URL = "http://127.0.0.1:9/v1"
#: How long one spawn may take to answer before the sample is a failure.
SPAWN_TIMEOUT_S = 60.0
GET_STATE = b'{"id":"s","type":"get_state"}\n'
ANSWER = b'"id":"s"'

#: The floor of a spawn: a trio process that reads one line and answers it.
FLOOR_CHILD = """
import os, trio

async def main():
    stdin = trio.lowlevel.FdStream(os.dup(0))
    stdout = trio.lowlevel.FdStream(os.dup(1))
    data = b""
    while b"\\n" not in data:
        chunk = await stdin.receive_some(65536)
        if not chunk:
            return
        data += chunk
    await stdout.send_all(b'{"id":"s","type":"response","command":"get_state","success":true}\\n')
    while await stdin.receive_some(65536):
        pass

trio.run(main)
"""

#: The floor of a session program's imports: trio and the standard library a session
#: needs whatever it is made of (its JSON, its ids, its timestamps).
SESSION_FLOOR = "import trio, json, uuid, datetime"

#: The floor of a start-up over HTTP: a trio child that reads the prompt's line, imports
#: httpx (without its command-line tool, as trio_session does), streams the same reply
#: from the same server and writes one ``agent_end`` line. Its argv[1] is the base URL.
FLOOR_HTTP_CHILD = """
import os, sys, trio

async def main():
    stdin = trio.lowlevel.FdStream(os.dup(0))
    stdout = trio.lowlevel.FdStream(os.dup(1))
    data = b""
    while b"\\n" not in data:
        chunk = await stdin.receive_some(65536)
        if not chunk:
            return
        data += chunk
    sys.modules["httpx._main"] = None
    import httpx
    del sys.modules["httpx._main"]
    body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    async with httpx.AsyncClient() as client:
        async with client.stream("POST", sys.argv[1] + "/chat/completions", json=body) as reply:
            async for _ in reply.aiter_bytes():
                pass
    await stdout.send_all(b'{"type":"agent_end","messages":[]}\\n')
    while await stdin.receive_some(65536):
        pass

trio.run(main)
"""

IMPORTS = {
    "python": "pass",
    "trio": "import trio",
    "session_floor": SESSION_FLOOR,
    "trio_session": "import trio_session",
    "session_names": "from trio_session import open_session, FauxProvider, Model",
    "rpc": "import trio_session.rpc",
}


def _median_ms(samples: Sequence[float]) -> float:
    return statistics.median(samples) * 1e3


#: Every child runs with bytecode cached, as an installed package does, even where the
#: environment says ``PYTHONDONTWRITEBYTECODE`` (then nothing would ever be cached).
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
COMPILE = (
    "import compileall, os, trio_session; "
    "compileall.compile_dir(os.path.dirname(trio_session.__file__), quiet=1)"
)


def compile_bytecode() -> None:
    """Compile the ``trio_session`` the children import (the one of ``REPO``) to bytecode."""
    subprocess.run([sys.executable, "-c", COMPILE], check=True, cwd=REPO, env=CHILD_ENV)


def time_import(code: str) -> float:
    """Seconds from ``Popen`` to the exit of ``python -c code``."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO, env=CHILD_ENV)
    return time.perf_counter() - start


def measure_imports(n: int) -> dict[str, list[float]]:
    """``n`` timed runs of each line of ``IMPORTS``, alternating, after one untimed run."""
    compile_bytecode()
    for code in IMPORTS.values():  # warms the page cache
        time_import(code)
    samples: dict[str, list[float]] = {name: [] for name in IMPORTS}
    for _ in range(n):
        for name, code in IMPORTS.items():
            samples[name].append(time_import(code))
    return samples


def _round_ratios(
    samples: dict[str, list[float]], ours: str, base: str, rounds: int
) -> tuple[float, ...]:
    """Per round (consecutive groups of alternating samples): median of ``ours`` ÷ median of
    ``base``."""
    a = chunked(samples[ours], rounds)
    b = chunked(samples[base], rounds)
    return pairs_ratio([statistics.median(x) for x in a], [statistics.median(x) for x in b])


def import_figures(n: int, rounds: int) -> list[Figure]:
    """``import.time`` and ``import.session``: medians of ``n`` fresh interpreters each."""
    samples = measure_imports(n)
    ms = {name: _median_ms(values) for name, values in samples.items()}
    common = f"python -c pass {ms['python']:.0f} ms; n={n} each"
    detail: dict[str, Any] = {
        "median_ms": ms,
        "ratio_to_trio": {name: value / ms["trio"] for name, value in ms.items()},
        "samples_ms": {name: [s * 1e3 for s in values] for name, values in samples.items()},
    }
    floor = f"import trio {ms['trio']:.0f} ms"
    return [
        Figure(
            "import.time",
            _round_ratios(samples, "trio_session", "trio", rounds),
            f"import trio_session {ms['trio_session']:.0f} ms ÷ import trio {ms['trio']:.0f} ms"
            f" ({common})",
            floor,
            detail,
        ),
        Figure(
            "import.session",
            _round_ratios(samples, "session_names", "trio", rounds),
            f"from trio_session import open_session, FauxProvider, Model"
            f" {ms['session_names']:.0f} ms ÷ import trio {ms['trio']:.0f} ms ({common})",
            f"{floor}; with json, uuid, datetime {ms['session_floor']:.0f} ms"
            f" ({ms['session_floor'] / ms['trio']:.2f}×)",
            {"median_ms": ms},
        ),
    ]


# -- rpc spawn ------------------------------------------------------------------------------


def pi_package() -> Path | None:
    """pi 0.73.1's package directory (``$PI_PACKAGE``, else where ``python
    tests/interop/install.py`` puts it, else ``DEFAULT_PI``), or None if it (or node) is
    not there. Nothing is installed here."""
    package = Path(os.environ.get("PI_PACKAGE", DEFAULT_PI))
    if "PI_PACKAGE" not in os.environ:
        sys.path.insert(0, str(REPO))
        try:
            from tests.interop.install import PI_0_73, install_root

            installed = install_root() / PI_0_73.pi_subdir
            if (installed / "dist" / "cli.js").is_file():
                package = installed
        except ImportError:
            pass
        finally:
            sys.path.remove(str(REPO))
    if shutil.which("node") is None or not (package / "dist" / "cli.js").is_file():
        return None
    return package


def _config(work: Path, base_url: str = UNUSED_URL) -> tuple[Path, dict[str, str]]:
    """A fresh agent dir (models.json, settings.json), project dir and HOME; the env."""
    sys.path.insert(0, str(REPO))
    try:  # the interop tests' own pi config: one provider, two models, short retries
        from tests.interop.conftest import models_json, settings_json
    finally:
        sys.path.remove(str(REPO))
    agent, project, home = work / "agent", work / "project", work / "home"
    for directory in (agent, project, home):
        directory.mkdir(parents=True)
    (agent / "models.json").write_text(json.dumps(models_json(base_url)))
    (agent / "settings.json").write_text(json.dumps(settings_json()))
    env = {
        **CHILD_ENV,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "PI_CODING_AGENT_DIR": str(agent),
        "PI_OFFLINE": "1",
        "PI_SKIP_VERSION_CHECK": "1",
        "OPENAI_API_KEY": "",
        "ANTHROPIC_API_KEY": "",
    }
    return agent, env


def time_spawn(
    argv: Sequence[str],
    env: dict[str, str],
    cwd: Path,
    request: bytes = GET_STATE,
    answer: bytes = ANSWER,
) -> float:
    """Seconds from ``Popen`` to having read the answer to ``request`` (a line holding
    ``answer``; by default the answer to ``get_state``).

    The child is then told to stop (its stdin closed) and waited for; one that does not
    answer in ``SPAWN_TIMEOUT_S`` is killed and the sample is an error.
    """
    start = time.perf_counter()
    process = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=cwd,
    )
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        process.stdin.write(request)
        process.stdin.flush()
        buffer = b""
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ)
            deadline = start + SPAWN_TIMEOUT_S
            while True:
                lines = buffer.split(b"\n")
                if any(answer in line for line in lines[:-1]):
                    took = time.perf_counter() - start
                    break
                if not selector.select(max(0.0, deadline - time.perf_counter())):
                    msg = f"{argv[0]} did not answer get_state in {SPAWN_TIMEOUT_S:g} s"
                    raise RuntimeError(msg)
                chunk = os.read(process.stdout.fileno(), 65536)
                if not chunk:
                    msg = f"{argv[0]} ended before answering get_state"
                    raise RuntimeError(msg)
                buffer += chunk
        process.stdin.close()
        try:
            process.wait(timeout=SPAWN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        return took
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()


PROMPT = b'{"id":"p","type":"prompt","message":"hi"}\n'
AGENT_END = b'{"type":"agent_end"'


def spawn_figures(n: int, rounds: int) -> list[Figure]:
    """``rpc.spawn`` (to the first ``get_state``) and ``rpc.spawn_http`` (to the first
    prompt's ``agent_end``, the model an OpenAI-compatible server on loopback): ``n``
    spawns of each agent, alternating, cut into ``rounds`` rounds."""
    package = pi_package()
    compile_bytecode()
    ours_args = ["rpc", "--provider", PROVIDER, "--model", MODEL]
    names = ("trio_session", "floor", "pi", "trio_session_http", "floor_http", "pi_http")
    samples: dict[str, list[float]] = {name: [] for name in names}
    node = shutil.which("node") or "node"
    pi_args = ["--mode", "rpc", "--provider", PROVIDER, "--model", MODEL]
    with tempfile.TemporaryDirectory() as tmp, LoopbackOpenAI(["Hello", " there."]) as server:
        for index in range(n + 1):  # the first round warms caches and is not counted
            work = Path(tmp) / f"run{index}"
            agent, env = _config(work)
            http_agent, http_env = _config(work / "http", server.base_url)
            ours = [sys.executable, "-m", "trio_session", *ours_args, "--agent-dir"]
            cwd, http_cwd = work / "project", work / "http" / "project"
            took = {
                "trio_session": time_spawn([*ours, str(agent)], env, cwd),
                "floor": time_spawn([sys.executable, "-c", FLOOR_CHILD], env, cwd),
                "trio_session_http": time_spawn(
                    [*ours, str(http_agent)], http_env, http_cwd, PROMPT, AGENT_END
                ),
                "floor_http": time_spawn(
                    [sys.executable, "-c", FLOOR_HTTP_CHILD, server.base_url],
                    http_env,
                    http_cwd,
                    PROMPT,
                    AGENT_END,
                ),
            }
            if package is not None:
                pi_cli = str(package / "dist" / "cli.js")
                took["pi"] = time_spawn([node, pi_cli, *pi_args], env, cwd)
                took["pi_http"] = time_spawn(
                    [node, pi_cli, *pi_args], http_env, http_cwd, PROMPT, AGENT_END
                )
            if index:
                for name, seconds in took.items():
                    samples[name].append(seconds)
    ms = {name: _median_ms(values) for name, values in samples.items() if values}
    detail: dict[str, Any] = {
        "median_ms": ms,
        "samples_ms": {name: [s * 1e3 for s in values] for name, values in samples.items()},
        "ratio_to_floor": ms["trio_session"] / ms["floor"],
        "http_requests": server.requests,
    }
    floor = f"a trio child answering get_state {ms['floor']:.0f} ms"
    if package is None:
        text = (
            f"skipped: pi 0.73.1 is not installed (python tests/interop/install.py);"
            f" trio-session rpc {ms['trio_session']:.0f} ms, to agent_end over HTTP"
            f" {ms['trio_session_http']:.0f} ms"
        )
        return [
            Figure("rpc.spawn", (math.nan,), text, floor, detail),
            Figure("rpc.spawn_http", (math.nan,), text, floor, detail),
        ]
    return [
        Figure(
            "rpc.spawn",
            _round_ratios(samples, "trio_session", "pi", rounds),
            f"trio-session rpc {ms['trio_session']:.0f} ms ÷ pi {ms['pi']:.0f} ms to the first"
            f" get_state (a trio child answering it: {ms['floor']:.0f} ms; n={n} each)",
            floor,
            detail,
        ),
        Figure(
            "rpc.spawn_http",
            _round_ratios(samples, "trio_session_http", "pi_http", rounds),
            f"trio-session rpc {ms['trio_session_http']:.0f} ms ÷ pi {ms['pi_http']:.0f} ms"
            f" from spawn to the first reply's agent_end, openai-completions on a loopback"
            f" server (n={n} each)",
            f"a trio child streaming the reply with httpx {ms['floor_http']:.0f} ms"
            f" ({ms['floor_http'] / ms['pi_http']:.3f}× pi)",
            {"median_ms": ms},
        ),
    ]


def measure(quick: bool) -> list[Figure]:
    """The figures of this module: ``import.time`` and ``rpc.spawn``."""
    if quick:
        return [*import_figures(4, 2), *spawn_figures(2, 2)]
    return [*import_figures(24, 4), *spawn_figures(12, 4)]


def main(argv: Sequence[str] | None = None) -> int:
    """Measure and print each figure beside its goal."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="few samples: proves it runs")
    parser.add_argument("--json", action="store_true", help="also print the figures as JSON")
    args = parser.parse_args(argv)
    machine = machine_info()
    print(f"{machine['cpu']} × {machine['nproc']}, Python {machine['python']}")
    figures = measure(args.quick)
    for figure in figures:
        goal = figure.goal
        verdict = "met" if goal.met(figure.value) else "NOT met"
        if math.isnan(figure.value):
            verdict = "skipped"
        print(f"{figure.key:<16} {figure.value:6.3f}×  goal {goal.wanted:<8} {verdict}")
        print(f"{'':14} {figure.text}")
    if args.json:
        print(json.dumps([f.as_json() for f in figures], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
