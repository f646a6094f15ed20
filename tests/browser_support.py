"""The browser the live page's tests drive: Debian's chromium, headless, through selenium."""
from __future__ import annotations

import shutil
from contextlib import contextmanager
from typing import Iterator

MISSING = None if (shutil.which("chromium") and shutil.which("chromedriver")) else \
    "chromium and chromium-driver are not installed (make setup installs them)"


@contextmanager
def headless_chromium(width: int = 1600, height: int = 900) -> Iterator[object]:
    """A selenium Chrome driver on chromium with a window of width x height; quit after."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", f"--window-size={width},{height}"):
        options.add_argument(arg)
    browser = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        yield browser
    finally:
        browser.quit()
