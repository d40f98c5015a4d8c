"""First-visit transfer size and load time of one dashboard page, in headless Chromium.

    .venv/bin/python scripts/measure_first_visit.py http://127.0.0.1:8731 /traces/1/ \
        --user lead --password PASSWORD [--runs 5]

Signs in through the login page, then for each run clears the browser cache and loads the
page: transfer size is the sum of the navigation's and every resource's transferSize (bytes on
the wire, after compression), load time is the navigation's loadEventEnd. Prints the median.
Not a timed test: numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.browser import CHROMEDRIVER, CHROMIUM, CHROMIUM_FLAGS  # noqa: E402

ENTRIES = """
const nav = performance.getEntriesByType('navigation')[0];
const res = performance.getEntriesByType('resource');
return {
  load_ms: nav.loadEventEnd,
  server_ms: nav.responseStart - nav.requestStart,
  transfer: nav.transferSize + res.reduce((s, r) => s + r.transferSize, 0),
  decoded: nav.decodedBodySize + res.reduce((s, r) => s + r.decodedBodySize, 0),
  resources: res.map(r => [r.name, r.transferSize, r.decodedBodySize]),
};
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base")
    parser.add_argument("path")
    parser.add_argument("--user", required=True)
    parser.add_argument("--password", required=True)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    with tempfile.TemporaryDirectory() as profile:
        options.add_argument(f"--user-data-dir={profile}")
        driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
        try:
            driver.get(args.base + "/login/")
            driver.find_element(By.ID, "id_username").send_keys(args.user)
            driver.find_element(By.ID, "id_password").send_keys(args.password)
            driver.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
            samples = []
            for _ in range(args.runs):
                driver.execute_cdp_cmd("Network.clearBrowserCache", {})
                driver.get(args.base + args.path)
                samples.append(driver.execute_script(ENTRIES))
        finally:
            driver.quit()
    last = samples[-1]
    for name, transfer, decoded in last["resources"]:
        print(f"  {transfer / 1024:8.1f} KiB on the wire  {decoded / 1024:8.1f} KiB decoded  {name}")
    print(
        f"{args.path}: first visit {statistics.median(s['transfer'] for s in samples) / 1024:.1f} KiB "
        f"transferred ({last['decoded'] / 1024:.1f} KiB decoded), load "
        f"{statistics.median(s['load_ms'] for s in samples):.0f} ms median of {len(samples)} "
        f"(of which the server's HTML response {statistics.median(s['server_ms'] for s in samples):.0f} ms)"
    )


if __name__ == "__main__":
    main()
