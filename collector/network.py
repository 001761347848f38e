"""Addresses: whether a host is this machine, and whether a request may use the environment's proxies.

`is_loopback` serves the judge settings (a key may go over plain http only to this machine) and
`may_use_env_proxy`, which the judge client and `send`'s OTLP exporters ask.

`HTTP_PROXY`, `HTTPS_PROXY` and `ALL_PROXY` are honoured by HTTP clients for every request unless
told otherwise. A request that carries a key (a judge's `Authorization`, an OTLP target's
headers) may use them only where the proxy cannot read the key: HTTPS to another machine, which
the proxy relays as a tunnel. A plain-HTTP request hands the proxy its headers in clear, and a
loopback address sent to a proxy reaches the proxy's machine, not this one.
"""

from __future__ import annotations

import ipaddress
import urllib.parse


def is_loopback(host: str) -> bool:
    """Whether `host` names this machine (a `localhost` name or a loopback address)."""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def may_use_env_proxy(url: str) -> bool:
    """Whether requests to `url` may go through the environment's proxies: HTTPS to another host.

    Clients told no (httpx and requests: `trust_env` off) also ignore `SSL_CERT_FILE` and
    `.netrc`: they go straight to the host the URL names.
    """
    parts = urllib.parse.urlsplit(url)
    return parts.scheme == "https" and not is_loopback(parts.hostname or "")
