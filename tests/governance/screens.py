"""Screenshots of a page at 1440 and 390 px for a person to look at, when FG_SCREENS names a folder."""

from __future__ import annotations

import os
from pathlib import Path

WIDTHS = (1440, 390)


def shoot(browser, name: str) -> None:
    folder = os.environ.get("FG_SCREENS")
    if not folder:
        return
    Path(folder).mkdir(parents=True, exist_ok=True)
    before = browser.get_window_size()
    for width in WIDTHS:
        browser.set_window_size(width, 1000)
        height = browser.execute_script("return document.documentElement.scrollHeight;")
        browser.set_window_size(width, min(int(height) + 120, 6000))
        browser.save_screenshot(str(Path(folder) / f"{name}-{width}.png"))
    browser.set_window_size(before["width"], before["height"])
