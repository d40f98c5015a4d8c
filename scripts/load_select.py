"""A bounded loopback load on selection: C clients select for D seconds, and the script reports
requests, throughput, p50/p95 latency and errors; optionally a backtest runs meanwhile and must
complete correctly.

Through the API (POST /api/v1/select, one selection and trace write each), with a lead's token;
`--backtest PATCH` first submits a proposal with that JSON merge patch (its backtest starts on
the worker) and checks at the end that it finished with one replay per task and side:

    python scripts/load_select.py --url http://127.0.0.1:8731 --token fg_... --project sift \
        --clients 4 --seconds 60 --backtest '{"class_pull": 4}'

Through the dashboard, replaying a stored trace under today's frame (POST /traces/<pk>/now/):

    python scripts/load_select.py --url http://127.0.0.1:8731 --user lead --password PW \
        --trace 12 --clients 4 --seconds 60

It refuses anything but a loopback address and caps clients (16) and duration (120 s): it is a
check that the server holds, not a tool to flood one. Exit status 0 only with zero errors (and,
with --backtest, a backtest that finished whole). docs/trust.md has the figures of the last run.
"""

from __future__ import annotations

import argparse
import http.cookiejar
import json
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
TIMEOUT = 60  # seconds for one request: a hung request is an error, not a hung script


def session(base: str, user: str, password: str) -> urllib.request.OpenerDirector:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    page = opener.open(f"{base}/login/", timeout=TIMEOUT).read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    body = urllib.parse.urlencode({"username": user, "password": password, "csrfmiddlewaretoken": token})
    request = urllib.request.Request(f"{base}/login/", data=body.encode(), headers={"Referer": f"{base}/login/"})
    landed = opener.open(request, timeout=TIMEOUT)
    if "/login/" in landed.geturl():
        raise SystemExit(f"login as {user} failed")
    return opener


def csrf(opener, base: str, trace: int) -> str:
    page = opener.open(f"{base}/traces/{trace}/now/", timeout=TIMEOUT).read().decode()
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)


def page_call(opener, base: str, trace: int, token: str):
    """One page replay: () -> (ok, what went wrong)."""
    url = f"{base}/traces/{trace}/now/"
    body = urllib.parse.urlencode({"csrfmiddlewaretoken": token}).encode()

    def call():
        response = opener.open(urllib.request.Request(url, data=body, headers={"Referer": url}), timeout=TIMEOUT)
        response.read()
        return response.status == 200 and "replay=" in response.geturl(), f"landed on {response.geturl()}"

    return call


def api(base: str, token: str, method: str, path: str, body=None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    request = urllib.request.Request(f"{base}/api/v1{path}", data=data, headers=headers, method=method)
    with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
        return json.loads(response.read())


def api_call(base: str, token: str, project: str, query: str):
    """One API selection: () -> (ok, what went wrong)."""

    def call():
        doc = api(base, token, "POST", "/select", {"project": project, "query": query})
        return bool(doc.get("trace_id") or doc.get("trace")), "no trace in the answer"

    return call


def client(call, until, latencies, errors, lock):
    while time.monotonic() < until:
        started = time.monotonic()
        try:
            ok, response = call()
        except (HTTPError, URLError, TimeoutError, ConnectionError, ValueError) as error:
            ok, response = False, error
        elapsed = time.monotonic() - started
        with lock:
            latencies.append(elapsed)
            if not ok:
                errors.append(str(response))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8731")
    parser.add_argument("--token", help="API mode: a lead's API token (POST /api/v1/select)")
    parser.add_argument("--project", help="API mode: the project to select in")
    parser.add_argument("--query", default="What should I know before changing the ranking evaluation?")
    parser.add_argument("--backtest", help="API mode: a JSON merge patch to propose; its backtest runs meanwhile")
    parser.add_argument("--user", help="page mode: who signs in")
    parser.add_argument("--password", help="page mode")
    parser.add_argument("--trace", type=int, help="page mode: a stored trace the user may replay")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args(argv)
    if args.token and not args.project:
        parser.error("--token needs --project")
    if not args.token and not (args.user and args.password and args.trace):
        parser.error("give --token and --project (API), or --user, --password and --trace (pages)")
    if args.backtest and not args.token:
        parser.error("--backtest needs the API mode (--token, a lead's)")
    host = urllib.parse.urlparse(args.url).hostname
    if host not in LOOPBACK:
        raise SystemExit(f"refused: {host} is not a loopback address")
    clients = max(1, min(args.clients, MAX_CLIENTS))
    seconds = max(1.0, min(args.seconds, MAX_SECONDS))
    base = args.url.rstrip("/")
    if args.token:
        calls = [api_call(base, args.token, args.project, args.query) for _ in range(clients)]
    else:
        openers = [session(base, args.user, args.password) for _ in range(clients)]
        calls = [page_call(o, base, args.trace, csrf(o, base, args.trace)) for o in openers]
    backtest = None
    if args.backtest:
        patch = json.loads(args.backtest)
        title = f"Load check {time.strftime('%Y-%m-%d %H:%M:%S')}"
        body = {"project": args.project, "title": title, "patch": patch}
        proposal = api(base, args.token, "POST", "/proposals", body)
        backtest = proposal["backtests"][0]["id"]
        print(f"proposal #{proposal['id']}: backtest #{backtest} started")
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()
    until = time.monotonic() + seconds
    threads = [threading.Thread(target=client, args=(call, until, latencies, errors, lock)) for call in calls]
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
    whole = True
    if backtest is not None:
        whole = backtest_whole(base, args.token, backtest)
    return 1 if errors or not whole else 0


def backtest_whole(base: str, token: str, backtest: int, wait: float = 600.0) -> bool:
    """Wait for the backtest; whole when finished with a baseline and a candidate replay per task."""
    deadline = time.monotonic() + wait
    while True:
        doc = api(base, token, "GET", f"/backtests/{backtest}")
        if doc["status"] not in ("queued", "running") or time.monotonic() > deadline:
            break
        time.sleep(2)
    progress = doc["progress"]
    rows = doc["tasks"]
    paired = sum(1 for row in rows if row["baseline_trace"] and row["candidate_trace"])
    whole = doc["status"] == "finished" and progress["done"] == progress["total"] and paired == len(rows)
    print(
        f"backtest #{backtest}: {doc['status']}, {progress['done']} of {progress['total']} replays, "
        f"{paired} of {len(rows)} tasks with both sides{'' if whole else ' — NOT whole: ' + doc['error']}"
    )
    return whole


if __name__ == "__main__":
    sys.exit(main())
