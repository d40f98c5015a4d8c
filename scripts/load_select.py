"""A bounded loopback load on selection through the dashboard: C clients replay a stored trace under
today's frame (POST /traces/<pk>/now/, one full selection and trace write each) for D seconds, and
the script reports requests, throughput, p50/p95 latency and errors.

    python scripts/load_select.py --url http://127.0.0.1:8731 --user lead --password PW \
        --trace 12 --clients 4 --seconds 60

It refuses anything but a loopback address and caps clients (16) and duration (120 s): it is a
check that the server holds, not a tool to flood one. Start a backtest first (the proposal page)
to see that both finish: the script prints the count of failed responses, which must be zero.
"""

from __future__ import annotations

import argparse
import http.cookiejar
import re
import statistics
import sys
import threading
import time
import urllib.parse
import urllib.request
from urllib.error import HTTPError, URLError

LOOPBACK = {"127.0.0.1", "localhost", "::1"}
MAX_CLIENTS, MAX_SECONDS = 16, 120


def session(base: str, user: str, password: str) -> urllib.request.OpenerDirector:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    page = opener.open(f"{base}/login/").read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    body = urllib.parse.urlencode({"username": user, "password": password, "csrfmiddlewaretoken": token})
    request = urllib.request.Request(f"{base}/login/", data=body.encode(), headers={"Referer": f"{base}/login/"})
    landed = opener.open(request)
    if "/login/" in landed.geturl():
        raise SystemExit(f"login as {user} failed")
    return opener


def csrf(opener, base: str, trace: int) -> str:
    page = opener.open(f"{base}/traces/{trace}/now/").read().decode()
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)


def client(opener, base, trace, token, until, latencies, errors, lock):
    url = f"{base}/traces/{trace}/now/"
    body = urllib.parse.urlencode({"csrfmiddlewaretoken": token}).encode()
    while time.monotonic() < until:
        started = time.monotonic()
        try:
            response = opener.open(urllib.request.Request(url, data=body, headers={"Referer": url}))
            ok = response.status == 200 and "replay=" in response.geturl()
        except (HTTPError, URLError, TimeoutError, ConnectionError) as error:
            ok, response = False, error
        elapsed = time.monotonic() - started
        with lock:
            latencies.append(elapsed)
            if not ok:
                errors.append(str(response))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8731")
    parser.add_argument("--user", required=True)
    parser.add_argument("--password", required=True)
    parser.add_argument("--trace", type=int, required=True, help="a stored trace the user may replay")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args(argv)
    host = urllib.parse.urlparse(args.url).hostname
    if host not in LOOPBACK:
        raise SystemExit(f"refused: {host} is not a loopback address")
    clients = max(1, min(args.clients, MAX_CLIENTS))
    seconds = max(1.0, min(args.seconds, MAX_SECONDS))
    base = args.url.rstrip("/")
    openers = [session(base, args.user, args.password) for _ in range(clients)]
    tokens = [csrf(o, base, args.trace) for o in openers]
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    until = time.monotonic() + seconds
    threads = [
        threading.Thread(target=client, args=(o, base, args.trace, t, until, latencies, errors, lock))
        for o, t in zip(openers, tokens, strict=True)
    ]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - started
    ordered = sorted(latencies)
    p95 = ordered[max(0, int(round(0.95 * len(ordered))) - 1)] if ordered else 0.0
    print(
        f"clients {clients}, {wall:.1f} s: {len(latencies)} requests, {len(latencies) / wall:.2f}/s, "
        f"p50 {statistics.median(ordered) * 1000 if ordered else 0:.0f} ms, p95 {p95 * 1000:.0f} ms, "
        f"errors {len(errors)}"
    )
    for error in errors[:5]:
        print(f"  error: {error}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
