"""Where a webhook may POST: https to a public address, never inside the server's own networks.

A target's host is resolved when it is delivered to, and every address it resolves to must be
public: one loopback, private, link-local, multicast, reserved, shared or unspecified address
(IPv4 or IPv6, an IPv4-mapped, 6to4 or Teredo IPv6 address judged by the IPv4 inside it) refuses
the whole target, unless its host or the address is in FG_WEBHOOK_ALLOWED_HOSTS. Numeric hosts in
any form the resolver accepts (`2130706433`, `0x7f.1`, `017700000001`, `127.1`) resolve to the
address they spell and are judged as it. The delivery then connects to the checked address
itself, so a second resolution cannot point it elsewhere.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class TargetRefused(Exception):
    """A webhook target the server will not send to; the message says why, for the delivery log."""


@dataclass(frozen=True)
class Target:
    """A checked target: the URL's parts and the addresses the delivery may connect to."""

    scheme: str
    host: str
    port: int
    path: str
    addresses: tuple[str, ...]


def address_refusal(address: Address) -> str | None:
    """Why `address` is not public (the first category it falls in), or None for a public one."""
    inner = _embedded_ipv4(address)
    if inner is not None:
        why = address_refusal(inner)
        return f"{why} (inside {address})" if why else None
    for name in ("unspecified", "loopback", "link_local", "multicast", "private", "reserved"):
        if getattr(address, f"is_{name}"):
            return name.replace("_", "-")
    if not address.is_global:
        return "not globally reachable"
    return None


def _embedded_ipv4(address: Address) -> ipaddress.IPv4Address | None:
    if address.version != 6:
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    # IPv4-compatible (::a.b.c.d, deprecated but still routed by some stacks)
    if int(address) >> 32 == 0 and int(address) > 1:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def _allowed(host: str, address: Address) -> bool:
    for entry in settings.FG_WEBHOOK_ALLOWED_HOSTS:
        entry = entry.strip().lower()
        if not entry:
            continue
        try:
            network = ipaddress.ip_network(entry.strip("[]"), strict=False)
        except ValueError:
            if entry == host.lower().rstrip("."):
                return True
            continue
        if address in network or (_embedded_ipv4(address) or address) in network:
            return True
    return False


def url_parts(url: str) -> tuple[str, str, int, str]:
    """The parts of `url` (scheme, host, port, path); TargetRefused for a form refused: https, or plain http
    where FG_WEBHOOK_ALLOW_HTTP is on (development), with a host and no credentials."""
    parts = urlsplit(url)
    schemes = ("https", "http") if settings.FG_WEBHOOK_ALLOW_HTTP else ("https",)
    if parts.scheme not in schemes:
        allowed = " or ".join(schemes)
        raise TargetRefused(f'"{url}" is not an {allowed} URL' + ("" if "http" in schemes else " (plain http is off)"))
    if not parts.hostname:
        raise TargetRefused(f'"{url}" names no host')
    if parts.username or parts.password:
        raise TargetRefused(f'"{url}" carries credentials: sign with the secret instead')
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError as bad:
        raise TargetRefused(f'"{url}": {bad}') from bad
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return parts.scheme, parts.hostname, port, path


def literal_refusal(url: str) -> str | None:
    """Why the host of `url`, when it is an address literal, is refused; None for a name (judged
    when delivered to) or a public address. Lets the page refuse `http://10.0.0.1/` at once."""
    _scheme, host, _port, _path = url_parts(url)
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        try:  # the shorthand and integer forms inet_aton reads (0x7f.1, 2130706433, 127.1)
            address = ipaddress.ip_address(socket.inet_aton(host))
        except OSError:
            return None
    why = address_refusal(address)
    if why is None or _allowed(host, address):
        return None
    return f"{host} is {address}, a {why} address"


def target_checked(url: str) -> Target:
    """Resolve `url`'s host now and check every address; TargetRefused names the first refused."""
    scheme, host, port, path = url_parts(url)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as failure:
        raise TargetRefused(f"{host} does not resolve: {failure}") from failure
    addresses: list[str] = []
    for info in infos:
        text = info[4][0].split("%", 1)[0]
        address = ipaddress.ip_address(text)
        why = address_refusal(address)
        if why is not None and not _allowed(host, address):
            raise TargetRefused(f"{host} resolves to {address}, a {why} address: refused")
        if text not in addresses:
            addresses.append(text)
    if not addresses:
        raise TargetRefused(f"{host} resolves to no address")
    return Target(scheme=scheme, host=host, port=port, path=path, addresses=tuple(addresses))
