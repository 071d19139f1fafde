"""An HTTP provider's connection pool: its limits, the client made off the event loop,
and what the pool holds now.

One provider is usually shared by every session of a service, and so is its pool:
``limits`` bounds how many connections it opens (``max_connections``; a request past
that waits for a free one, up to the pool timeout) and how many idle ones it keeps
for the next request (``max_keepalive_connections``, each for ``keepalive_expiry``
seconds). ``DEFAULT_LIMITS`` are httpx's own.

Making the client costs the first request: importing httpx (some 20 ms, without its
command-line tool: see ``_httpx.load_httpx``) and the direct transport's TLS context
(``ssl.create_default_context`` loads the CA bundle, some 15 ms; httpx builds one even
for ``http://``). ``make_client_off_loop`` runs both in worker threads
(``trio.to_thread.run_sync``), at the same time: loading the CA bundle releases the GIL,
so it costs nothing beside the import. The event loop and every other session on it go
on meanwhile. Under an autojump clock (``trio.testing.MockClock`` with
``autojump_threshold`` set, as tests use) the client is made inline instead: that clock
jumps to the next deadline whenever every task waits, a thread's work included, so a
thread would let virtual time run ahead and fire timeouts; inline, the work costs no
virtual time at all.

``pool_stats`` reads httpcore's pools (``AsyncConnectionPool.connections``, and its
queue of requests waiting for a connection) behind the client's transports; a
transport that is not httpx's own counts nothing but the requests in flight.
"""

from __future__ import annotations

import math
import os
import ssl
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias

import trio

from ._httpx import load_httpx
from ._proxy import proxy_mounts

if TYPE_CHECKING:
    import httpx

    #: What ``limits`` may be given as: an ``httpx.Limits``, or just ``max_connections``.
    LimitsValue: TypeAlias = httpx.Limits | int | None

#: httpx's defaults: 100 connections at most, 20 kept alive, for 5 s.
DEFAULT_MAX_CONNECTIONS = 100
DEFAULT_MAX_KEEPALIVE = 20
DEFAULT_KEEPALIVE_EXPIRY = 5.0


def check_limits(value: object) -> None:
    """Refuse a ``limits`` that is neither ``None``, a positive int, nor ``httpx.Limits``.

    Raises:
        ValueError: any other value, named in the message.
    """
    if value is None or type(value).__name__ == "Limits":
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        msg = (
            "limits must be an httpx.Limits, a number of connections of at least 1, or None,"
            f" not {value!r}"
        )
        raise ValueError(msg)


def as_limits(value: LimitsValue) -> httpx.Limits:
    """``value`` as an ``httpx.Limits``: ``None`` is httpx's defaults; an int is
    ``max_connections``, and as many kept alive while idle (for 5 s), so that a service
    whose sessions all ask at once does not reconnect for most of them every time.

    Args:
        value: what the provider was given.
    """
    import httpx

    if isinstance(value, httpx.Limits):
        return value
    if value is None:
        return httpx.Limits(
            max_connections=DEFAULT_MAX_CONNECTIONS,
            max_keepalive_connections=DEFAULT_MAX_KEEPALIVE,
            keepalive_expiry=DEFAULT_KEEPALIVE_EXPIRY,
        )
    return httpx.Limits(
        max_connections=value,
        max_keepalive_connections=value,
        keepalive_expiry=DEFAULT_KEEPALIVE_EXPIRY,
    )


def tls_context(environ: Mapping[str, str] = os.environ) -> ssl.SSLContext:
    """The TLS context httpx's transport builds for ``verify=True`` (httpx's
    ``create_ssl_context``, the environment trusted): the CA file ``SSL_CERT_FILE``
    names, else the directory ``SSL_CERT_DIR`` names, else certifi's bundle. Slow (it
    loads the bundle): run it in a worker thread.

    Args:
        environ: the environment to read.
    """
    if environ.get("SSL_CERT_FILE"):
        return ssl.create_default_context(cafile=environ["SSL_CERT_FILE"])
    if environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context(capath=environ["SSL_CERT_DIR"])
    import certifi  # httpx's own dependency, and its default bundle

    return ssl.create_default_context(cafile=certifi.where())


def make_client(
    timeout: Any, limits: LimitsValue, tls: ssl.SSLContext | None = None
) -> httpx.AsyncClient:
    """The client a provider owns: ``retries=0`` on every transport (R-28a), the
    environment's proxies, no redirects, and ``limits`` on the direct transport and on
    each proxy's. Slow (imports httpx, builds TLS contexts): run it in a worker thread.

    Args:
        timeout: what ``httpx.Timeout`` takes.
        limits: the pool's limits (see ``as_limits``).
        tls: the direct transport's TLS context (``tls_context``); httpx builds the
            same one if ``None``.
    """
    load_httpx()  # the first import of httpx: without its command-line tool
    import httpx

    pool = as_limits(limits)
    return httpx.AsyncClient(
        transport=httpx.AsyncHTTPTransport(
            retries=0, limits=pool, verify=True if tls is None else tls
        ),
        mounts=proxy_mounts(limits=pool),  # HTTP(S)_PROXY, NO_PROXY: see _proxy
        timeout=timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout),
        follow_redirects=False,
    )


async def make_client_off_loop(timeouts: Any, limits: LimitsValue) -> httpx.AsyncClient:
    """``make_client`` in a worker thread, its TLS context built in another meanwhile;
    inline under an autojump clock (see above).

    Args:
        timeouts: what ``httpx.Timeout`` takes.
        limits: the pool's limits (see ``as_limits``).
    """
    clock = trio.lowlevel.current_clock()
    if getattr(clock, "autojump_threshold", math.inf) != math.inf:
        return make_client(timeouts, limits)
    tls: list[ssl.SSLContext] = []

    async def build_tls() -> None:
        tls.append(await trio.to_thread.run_sync(tls_context))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(build_tls)
        await trio.to_thread.run_sync(_import_client_code)
    return await trio.to_thread.run_sync(make_client, timeouts, limits, tls[0])


def _import_client_code() -> None:
    """Import what ``make_client`` runs: httpx, and httpcore (which httpx imports when
    it makes its first transport)."""
    load_httpx()
    import httpcore  # noqa: F401 - for sys.modules


def _pools(client: Any) -> Iterable[Any]:
    """httpcore's connection pools behind ``client``: its transport's and each mount's."""
    transports = [getattr(client, "_transport", None)]
    transports.extend(getattr(client, "_mounts", {}).values())
    for transport in transports:
        pool = getattr(transport, "_pool", None)
        if pool is not None and hasattr(pool, "connections"):
            yield pool


def pool_stats(client: Any, in_flight: int) -> dict[str, int]:
    """What ``HttpProvider.pool_stats`` reports (see there).

    Args:
        client: the provider's ``httpx.AsyncClient``, or ``None`` before the first request.
        in_flight: the provider's requests under way.
    """
    stats = {
        "requests_in_flight": in_flight,
        "requests_waiting": 0,
        "connections": 0,
        "connections_in_use": 0,
        "connections_idle": 0,
    }
    if client is None:
        return stats
    for pool in _pools(client):
        connections = list(pool.connections)
        idle = sum(1 for c in connections if c.is_idle())
        stats["connections"] += len(connections)
        stats["connections_idle"] += idle
        stats["connections_in_use"] += len(connections) - idle
        queued = getattr(pool, "_requests", ())
        stats["requests_waiting"] += sum(1 for r in queued if r.is_queued())
    return stats
