"""Where model requests may go: the outbound URL policy (an admin's allow-list of endpoint hosts).

An operator picks an endpoint's base URL, and the worker POSTs there and keeps what comes back;
without a policy that is a way into the worker's network (Redis on 127.0.0.1:6379, the cloud
metadata service on 169.254.169.254). ``OutboundPolicy`` decides per host:

* ``allowed`` lists host name patterns (``api.openai.com``, ``*.openai.azure.com``, ``*`` for any
  public host), IP addresses and networks (``10.0.0.0/8``). A host must match one of them.
* Every address the host resolves to must be public — unless it is explicitly allowed: inside a
  listed network or address, or the host is listed by its exact name (``vllm.internal``), never
  through a wildcard. Loopback, private, link-local (cloud metadata), shared, multicast, reserved
  and unspecified addresses are refused otherwise.

The check runs when a configuration is stored (the Django apps) and again on every connection the
engine's client opens (``guarded_http_client``): the connection goes to the address that was
checked, so a name that resolves differently a moment later (DNS rebinding) or a redirect to
another host is checked too. The policy is built from TB_OUTBOUND_ALLOWED_HOSTS or installed by the
caller (``install_policy``); this module never imports Django.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import os
import socket
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpcore2
import httpx2

ENV_NAME = "TB_OUTBOUND_ALLOWED_HOSTS"
DEFAULT_ALLOWED = ("*",)
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class OutboundRefused(Exception):
    """A request the outbound policy does not allow; the message says which host and why."""


def _kind_of(address: Address) -> str:
    """Why `address` is not public ('' when it is): what the refusal says."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return _kind_of(address.ipv4_mapped)
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address (cloud metadata services live there)"
    if address.is_unspecified:
        return "an unspecified address"
    if address.is_multicast:
        return "a multicast address"
    if address.is_private:
        return "a private address"
    if address.is_reserved or not address.is_global:
        return "a reserved or shared address"
    return ""


@dataclass(frozen=True)
class OutboundPolicy:
    """The allow-list of endpoint hosts (patterns, addresses, networks); see the module docstring."""

    allowed: tuple[str, ...] = DEFAULT_ALLOWED

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> OutboundPolicy:
        """TB_OUTBOUND_ALLOWED_HOSTS (comma-separated), or any public host when unset."""
        raw = (os.environ if environ is None else environ).get(ENV_NAME)
        if raw is None:
            return cls()
        return cls.of(raw.split(","))

    @classmethod
    def of(cls, entries: Iterable[str]) -> OutboundPolicy:
        return cls(tuple(entry.strip().lower() for entry in entries if entry.strip()))

    def _networks(self) -> list[Network]:
        found = []
        for entry in self.allowed:
            try:
                found.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
            except ValueError:
                continue
        return found

    def _patterns(self) -> list[str]:
        return [entry for entry in self.allowed if _network_or_none(entry) is None]

    def host_refusal(self, host: str) -> str:
        """Why `host` (a name or an address) is not on the list ('' when it is); no DNS."""
        host = host.lower().strip("[]")
        literal = _address_or_none(host)
        if literal is not None:
            if any(literal in network for network in self._networks()):
                return ""
            kind = _kind_of(literal)
            if kind:
                return (
                    f"host {host} is {kind}; outbound requests to it are refused unless {ENV_NAME} lists it"
                )
            if any(fnmatch.fnmatchcase(host, pattern) for pattern in self._patterns()):
                return ""
            return f"host {host} is not in {ENV_NAME} ({', '.join(self.allowed) or 'empty'})"
        if any(fnmatch.fnmatchcase(host, pattern) for pattern in self._patterns()):
            return ""
        return f"host {host} is not in {ENV_NAME} ({', '.join(self.allowed) or 'empty'})"

    def address_refusal(self, host: str, address: str) -> str:
        """Why a connection to `host` at `address` (one it resolved to) is refused ('' when allowed)."""
        host = host.lower().strip("[]")
        ip = ipaddress.ip_address(address.split("%")[0])
        if any(ip in network for network in self._networks()):
            return ""
        kind = _kind_of(ip)
        if not kind:
            return ""
        if _address_or_none(host) is None and host in self._patterns():  # listed by its exact name
            return ""
        return (
            f"host {host} resolves to {ip}, {kind}; outbound requests to it are refused unless "
            f"{ENV_NAME} lists the host by name or the address"
        )

    def url_refusal(self, url: str, *, resolve: bool = True) -> str:
        """Why requests to `url` are refused ('' when allowed): scheme, host on the list, and — with
        `resolve` — every address the host resolves to now (a name that does not resolve passes here;
        the connection-time check decides then)."""
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            return f"{url!r} is not a valid URL"
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return f"{url!r} must be an http:// or https:// URL with a host"
        host = parts.hostname
        refusal = self.host_refusal(host)
        if refusal or not resolve:
            return refusal
        try:
            addresses = resolve_host(host, port or (443 if parts.scheme == "https" else 80))
        except OSError:
            return ""
        for address in addresses:
            refusal = self.address_refusal(host, address)
            if refusal:
                return refusal
        return ""

    def checked_addresses(self, host: str, port: int) -> list[str]:
        """The addresses a connection to host:port may use; raises OutboundRefused or OSError."""
        refusal = self.host_refusal(host)
        if refusal:
            raise OutboundRefused(refusal)
        addresses = resolve_host(host, port)
        for address in addresses:
            refusal = self.address_refusal(host, address)
            if refusal:
                # One refused address refuses the host: a name that mixes public and internal
                # addresses is either misconfigured or a rebinding attempt.
                raise OutboundRefused(refusal)
        return addresses


def _address_or_none(text: str) -> Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def _network_or_none(text: str) -> Network | None:
    try:
        return ipaddress.ip_network(text.strip("[]"), strict=False)
    except ValueError:
        return None


def resolve_host(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (an address literal: itself), in resolver order; OSError when none."""
    literal = _address_or_none(host.strip("[]"))
    if literal is not None:
        return [str(literal)]
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


_installed: OutboundPolicy | None = None
_installed_lock = threading.Lock()


def install_policy(policy: OutboundPolicy | None) -> None:
    """Make `policy` the process's policy (None: read TB_OUTBOUND_ALLOWED_HOSTS again)."""
    global _installed
    with _installed_lock:
        _installed = policy


def current_policy() -> OutboundPolicy:
    """The installed policy, else the one TB_OUTBOUND_ALLOWED_HOSTS describes."""
    return _installed if _installed is not None else OutboundPolicy.from_env()


class _GuardedBackend(httpcore2.SyncBackend):
    """Opens TCP connections only to addresses the policy allows, and to exactly those it checked."""

    def __init__(self, policy: OutboundPolicy) -> None:
        self.policy = policy

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.NetworkStream:
        addresses = self.policy.checked_addresses(host, port)
        last: Exception | None = None
        for address in addresses:
            try:
                # TLS still verifies and sends the host's name: httpcore passes the origin's host to
                # start_tls, not the address we connect to.
                return super().connect_tcp(address, port, timeout, local_address, socket_options)
            except httpcore2.ConnectError as exc:
                last = exc
        raise last or httpcore2.ConnectError(f"no address for {host}")


def guarded_http_client(policy: OutboundPolicy, **kwargs: Any) -> httpx2.Client:
    """An httpx2 client (for the OpenAI SDK's ``http_client``) whose every connection — redirects
    included — passes `policy`; a request's URL host is checked before it is sent, so a proxy in
    between does not hide it."""
    transport = httpx2.HTTPTransport(
        limits=kwargs.pop("limits", httpx2.Limits(max_connections=1000, max_keepalive_connections=100))
    )
    pool = getattr(transport, "_pool", None)
    if not isinstance(pool, httpcore2.ConnectionPool) or not hasattr(pool, "_network_backend"):
        raise RuntimeError("httpx2's transport changed: the outbound policy cannot guard its connections")
    pool._network_backend = _GuardedBackend(policy)

    def check_request(request: httpx2.Request) -> None:
        refusal = policy.host_refusal(request.url.host)
        if refusal:
            raise OutboundRefused(refusal)

    return httpx2.Client(
        transport=transport,
        follow_redirects=True,
        event_hooks={"request": [check_request]},
        **kwargs,
    )


def refused_cause(exc: BaseException) -> OutboundRefused | None:
    """The OutboundRefused behind `exc` (the SDK wraps it in a connection error), if any."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OutboundRefused):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None
