"""A local HTTP receiver for webhook tests: a boundary we do not own (the subscriber's server),
played by a real http.server on 127.0.0.1 that records each request and answers a scripted status."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Receiver:
    def __init__(self, statuses=(200,), headers=None):
        self.statuses = list(statuses)  # one per request; the last repeats
        answer_headers = dict(headers or {})  # sent with every answer (a redirect's Location)
        self.requests: list[dict] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.requests.append({"headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
                index = min(len(receiver.requests), len(receiver.statuses)) - 1
                self.send_response(receiver.statuses[index])
                for name, value in answer_headers.items():
                    self.send_header(name, value)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
