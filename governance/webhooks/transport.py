"""One POST to a checked webhook target: to the address that was checked, no redirect followed.

http.client, not urllib: urllib resolves the host again (a name can answer differently the
second time) and follows redirects (a 302 to http://127.0.0.1:6379/ would reach inside). Here the
socket connects to an address targets.target_checked approved, TLS verifies the certificate
against the URL's host name, and a 3xx answer is an answer like any other, recorded, not followed.
"""

from __future__ import annotations

import http.client
import socket
import ssl
from dataclasses import dataclass

from .targets import Target


@dataclass(frozen=True)
class Answer:
    status: int | None  # None: no HTTP answer came
    error: str


def _connected(address: str, port: int, connect_timeout: float, read_timeout: float) -> socket.socket:
    sock = socket.create_connection((address, port), timeout=connect_timeout)
    sock.settimeout(read_timeout)
    return sock


class _PinnedHTTP(http.client.HTTPConnection):
    def __init__(self, target: Target, address: str, connect_timeout: float, read_timeout: float):
        super().__init__(target.host, target.port, timeout=read_timeout)
        self._pinned = (address, connect_timeout, read_timeout)

    def connect(self):
        address, connect_timeout, read_timeout = self._pinned
        self.sock = _connected(address, self.port, connect_timeout, read_timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    def __init__(self, target: Target, address: str, connect_timeout: float, read_timeout: float):
        super().__init__(target.host, target.port, timeout=read_timeout, context=ssl.create_default_context())
        self._pinned = (address, connect_timeout, read_timeout)

    def connect(self):
        address, connect_timeout, read_timeout = self._pinned
        sock = _connected(address, self.port, connect_timeout, read_timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


def post(
    target: Target, body: bytes, headers: dict[str, str], *, connect_timeout: float, read_timeout: float
) -> Answer:
    """POST `body` to the first of the target's addresses that accepts a connection."""
    kind = _PinnedHTTPS if target.scheme == "https" else _PinnedHTTP
    failures = []
    for address in target.addresses:
        connection = kind(target, address, connect_timeout, read_timeout)
        try:
            connection.request("POST", target.path, body=body, headers=headers)
            response = connection.getresponse()
            status = response.status
            response.read(65536)  # the answer's start; a subscriber's body is not kept
        except (OSError, http.client.HTTPException) as failure:
            failures.append(f"{address}: {failure or type(failure).__name__}")
            continue
        finally:
            connection.close()
        if 300 <= status < 400:
            return Answer(status, f"HTTP {status}: redirects are not followed")
        return Answer(status, "" if 200 <= status < 300 else f"HTTP {status}")
    return Answer(None, "; ".join(failures) or "no address to connect to")
