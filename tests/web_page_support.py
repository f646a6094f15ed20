"""What the live page's tests reach it with: plain HTTP (its page, its API, its changes with a
token) and a real browser (Debian's chromium, headless, through selenium)."""
from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
from contextlib import contextmanager
from typing import Any, Iterator

MISSING = None if (shutil.which("chromium") and shutil.which("chromedriver")) else \
    "chromium and chromium-driver are not installed (make setup installs them)"
# How long a script may take in the page: chromedriver's default (30 s) was once not enough for
# the one-line read of a page whose renderer a busy CI machine starved
SCRIPT_TIMEOUT_S = 90


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
    browser.set_script_timeout(SCRIPT_TIMEOUT_S)
    try:
        yield browser
    finally:
        browser.quit()


def http_get(url: str, timeout: float = 10.0) -> tuple[int, bytes, str]:
    """(status, body, content type) of a GET, an error status included."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 - the tests' own servers
            return r.status, r.read(), r.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers.get("Content-Type", "")


def http_post(url: str, body: Any = None, token: str | None = None, raw: bytes | None = None,
              timeout: float = 10.0) -> tuple[int, dict]:
    """(status, JSON answer) of a POST of ``body`` as JSON (or of ``raw`` bytes), with ``token``
    as its bearer when given."""
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    data = raw if raw is not None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:  # noqa: S310 - the tests' own servers
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
