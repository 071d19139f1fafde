"""The environment's HTTP proxies, as the providers' own client routes through them.

An HTTP provider builds its client with its own transport (``retries=0``, R-28a), and
httpx reads ``HTTP_PROXY`` & co. only for the transport it would have made itself. So
the proxies are read here, as curl and pi (node's ``EnvHttpProxyAgent``) read them:

- ``HTTPS_PROXY`` for ``https://`` requests, ``HTTP_PROXY`` for ``http://``,
  ``ALL_PROXY`` for both when the one of the scheme is unset; lower-case names first;
- ``NO_PROXY``: comma-separated hosts that go direct — ``*`` (everything), a host and
  its subdomains (``example.com``, ``.example.com``), ``localhost``, an IPv4 or IPv6
  address, or a ``scheme://host`` pattern.

Each proxy gets a transport as the direct one is (``retries=0``); httpx sends ``https``
through it with ``CONNECT``, so the proxy never sees the key there. A proxy URL's
password is a secret like the API key: ``proxy_secrets`` gives it to the redaction.
"""

from __future__ import annotations

import base64
import ipaddress
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

if TYPE_CHECKING:
    import httpx


def environment_proxies(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """``{"http": URL, "https": URL, "all": URL, "no": HOSTS}`` from ``*_proxy`` variables.

    A lower-case variable wins over its upper-case twin (curl's and urllib's rule).

    Args:
        environ: the environment to read.

    Returns:
        The scheme names (and ``no``) of the variables that are set and not empty.
    """
    found: dict[str, str] = {}
    for name in ("http", "https", "all", "no"):
        for variable in (f"{name}_proxy", f"{name.upper()}_PROXY"):
            value = environ.get(variable, "").strip()
            if value:
                found[name] = value
                break
    return found


def _with_scheme(url: str) -> str:
    return url if "://" in url else f"http://{url}"


def _direct_pattern(host: str) -> str:
    """The httpx mount pattern of one ``NO_PROXY`` entry."""
    if "://" in host:
        return host
    bare = host.strip("[]")
    try:
        address = ipaddress.ip_address(bare)
    except ValueError:
        address = None
    if address is not None:
        return f"all://[{bare}]" if address.version == 6 else f"all://{bare}"
    if host.lower() == "localhost":
        return "all://localhost"
    return f"all://*{host.lstrip('*')}"


def proxy_routes(environ: Mapping[str, str] = os.environ) -> dict[str, str | None]:
    """Mount pattern → proxy URL (``None``: go direct), for the environment's proxies.

    Args:
        environ: the environment to read.

    Returns:
        Empty when no proxy is set, or ``NO_PROXY`` is ``*``.
    """
    found = environment_proxies(environ)
    routes: dict[str, str | None] = {}
    fallback = found.get("all")
    for scheme in ("http", "https"):
        proxy = found.get(scheme, fallback)
        if proxy:
            routes[f"{scheme}://"] = _with_scheme(proxy)
    if not routes:
        return {}
    for host in (h.strip() for h in found.get("no", "").split(",")):
        if host == "*":
            return {}
        if host:
            routes[_direct_pattern(host)] = None
    return routes


def proxy_mounts(
    environ: Mapping[str, str] = os.environ, *, limits: httpx.Limits | None = None
) -> dict[str, httpx.AsyncBaseTransport | None]:
    """httpx ``mounts`` for the environment's proxies, each transport with ``retries=0``.

    Args:
        environ: the environment to read.
        limits: each proxy transport's pool limits; httpx's defaults if ``None``.

    Returns:
        What ``httpx.AsyncClient(mounts=…)`` takes; ``None`` routes go direct.
    """
    import httpx

    if limits is None:  # httpx's defaults
        limits = httpx.Limits(max_connections=100, max_keepalive_connections=20)
    return {
        pattern: None
        if proxy is None
        else httpx.AsyncHTTPTransport(proxy=proxy, retries=0, limits=limits)
        for pattern, proxy in proxy_routes(environ).items()
    }


def proxy_secrets(environ: Mapping[str, str] = os.environ) -> tuple[str, ...]:
    """The passwords in the environment's proxy URLs, to be redacted like a key, in every
    form a proxy may echo them in.

    httpx sends a proxy URL's ``user:password`` (percent-decoded) as
    ``Proxy-Authorization: Basic base64(user:password)``; a proxy that refuses the
    request may quote that header. So each password is a secret as written in the URL,
    percent-decoded, and base64-encoded — ``user:password`` and the password alone,
    standard and URL-safe, with and without ``=`` padding.

    Args:
        environ: the environment to read.

    Returns:
        Each form of each password, if any URL has one.
    """
    secrets: set[str] = set()
    for name, url in environment_proxies(environ).items():
        if name == "no":
            continue
        try:
            parts = urlsplit(_with_scheme(url))
            user, password = parts.username, parts.password
        except ValueError:  # a port that is not a number: the password is in the text still
            user, password = _userinfo(url)
        if not password:
            continue
        plain = unquote(password)
        secrets |= {password, plain}
        for text in (f"{unquote(user or '')}:{plain}", plain):
            for encode in (base64.b64encode, base64.urlsafe_b64encode):
                encoded = encode(text.encode()).decode("ascii")
                secrets |= {encoded, encoded.rstrip("=")}
    return tuple(sorted(secrets))


def _userinfo(url: str) -> tuple[str | None, str | None]:
    """``(user, password)`` of a proxy URL read as text, for one ``urlsplit`` refuses."""
    authority = url.partition("://")[2] if "://" in url else url
    userinfo, at, _ = authority.rpartition("@")
    if not at or ":" not in userinfo:
        return None, None
    user, _, password = userinfo.partition(":")
    return user, password
