"""Headless Chromium (Debian's ``chromium``) driven by Playwright for Python, for the console's browser
tests: no browser is downloaded (``executable_path`` is Debian's), and the flags keep Chromium off the
network it cannot reach here. ``BrowserPage`` records the page's console errors and uncaught exceptions,
which a test must end without, and saves screenshots as test artifacts."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

T = TypeVar("T")

CHROMIUM = os.environ.get("SAMSA_CHROMIUM", "/usr/bin/chromium")
FLAGS = [
    "--headless=new",
    "--no-sandbox",  # the tests may run as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Where screenshots go: SAMSA_ARTIFACTS, or .cache/artifacts in the checkout; the README's images also go
# to SAMSA_SCREENSHOTS when it is set (`make screenshots`).
SCREENSHOTS = os.environ.get("SAMSA_SCREENSHOTS")
ARTIFACTS = Path(
    os.environ.get("SAMSA_ARTIFACTS", Path(__file__).resolve().parents[2] / ".cache" / "artifacts")
)


def chromium_or_skip() -> str:
    """The Chromium executable, or a skip saying why there is none."""
    if not (os.path.exists(CHROMIUM) or shutil.which(CHROMIUM)):
        pytest.skip(
            f"no Chromium at {CHROMIUM}: `make test` installs Debian's chromium (apt-get install chromium)"
        )
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.skip("Playwright for Python is not installed (pip install -e '.[test]')")
    return CHROMIUM


def off_the_loop(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Runs ``fn`` in another thread and returns its result: Playwright's sync API keeps an event loop
    running in the test's thread, where what runs ``asyncio.run`` (the cluster's and the tools' calls)
    cannot."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(fn, *args, **kwargs).result()


@contextmanager
def launched_browser() -> Iterator[Any]:
    """A headless Chromium, closed on exit."""
    from playwright.sync_api import sync_playwright

    executable = chromium_or_skip()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=FLAGS)
        try:
            yield browser
        finally:
            browser.close()


class BrowserPage:
    """A Playwright page that keeps what went wrong in it: ``errors`` (console errors, uncaught
    exceptions, failed requests to the console)."""

    def __init__(self, page: Any, base_url: str) -> None:
        self.page = page
        self.base_url = base_url
        self.errors: list[str] = []
        page.on(
            "console",
            lambda m: self.errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None,
        )
        page.on("pageerror", lambda e: self.errors.append(f"uncaught: {e}"))
        page.on("requestfailed", self._request_failed)
        page.set_default_timeout(20_000)

    def _request_failed(self, request: Any) -> None:
        # An event stream cut by leaving the page is not a failure.
        if request.url.startswith(self.base_url) and "/events/" not in request.url:
            self.errors.append(f"request failed: {request.url} {request.failure}")

    def goto(self, path: str) -> Any:
        response = self.page.goto(self.base_url + path)
        self.page.wait_for_load_state("load")
        return response

    def screenshot(self, name: str, directory: Path | None = None) -> Path:
        """Saves a full-page screenshot as ``ARTIFACTS/console/<name>.png`` (or in ``directory``)."""
        target = (directory or ARTIFACTS / "console") / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}.png"
        target.parent.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(target), full_page=True)
        return target

    def readme_shot(self, name: str) -> Path | None:
        """The README's picture of a page (``console-<name>.png``), taken when ``make screenshots`` asks
        for them (SAMSA_SCREENSHOTS names the directory); None otherwise."""
        if not SCREENSHOTS:
            return None
        return self.screenshot(f"console-{name}", Path(SCREENSHOTS))
