"""The answer page in a real headless Chromium (Debian's chromium and chromium-driver, installed
by `scripts/install.sh --test`), driven over WebDriver with plain HTTP: a person opens the page,
taps Deny, confirms, and the dialog in the real tmux pane is refused; the same link again is
refused."""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from app.run.watcher import Watcher
from tests.front.answer_page import asking_pane, serving
from tests.support.waiting import STARTS_WITHIN_S, retry_until, stop_process

CHROMIUM = shutil.which("chromium")
DRIVER = shutil.which("chromedriver")
ELEMENT = "element-6066-11e4-a52e-4f735466cecf"  # the W3C WebDriver element reference key
# What the machine's probe found Chromium needs here: no sandbox as root, and no background
# connections (the network is closed; they would fail many at a time).
FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage"]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None or DRIVER is None,
                       reason="needs Debian's chromium and chromium-driver "
                              "(scripts/install.sh --test installs them)"),
]


class Browser:
    """One WebDriver session of headless Chromium."""

    def __init__(self, driver_url: str, profile: Path) -> None:
        self._url = driver_url
        options = {"binary": CHROMIUM, "args": [*FLAGS, f"--user-data-dir={profile}"]}
        made = self._call("post", "/session", {"capabilities": {"alwaysMatch": {
            "browserName": "chrome", "goog:chromeOptions": options}}})
        self._session = f"/session/{made['sessionId']}"

    def open(self, url: str) -> None:
        self._call("post", f"{self._session}/url", {"url": url})

    def source(self) -> str:
        return str(self._call("get", f"{self._session}/source"))

    def click(self, css: str, text: str | None = None) -> None:
        found = self._call("post", f"{self._session}/elements",
                           {"using": "css selector", "value": css})
        for element in found:
            ref = element[ELEMENT]
            if text is None or self._call("get", f"{self._session}/element/{ref}/text") == text:
                self._call("post", f"{self._session}/element/{ref}/click", {})
                return
        raise AssertionError(f"no {css} {text!r} on the page:\n{self.source()}")

    def link(self, text: str) -> str:
        found = self._call("post", f"{self._session}/elements",
                           {"using": "link text", "value": text})
        assert found, self.source()
        return str(self._call("get", f"{self._session}/element/{found[0][ELEMENT]}"
                                     "/property/href"))

    def close(self) -> None:
        self._call("delete", self._session)

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        reply = requests.request(method, self._url + path, json=body, timeout=STARTS_WITHIN_S)
        assert reply.ok, reply.text
        return reply.json()["value"]


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert DRIVER is not None
    driver = subprocess.Popen([DRIVER, f"--port={port}"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            return bool(requests.get(url + "/status", timeout=5).json()["value"]["ready"])
        except (requests.RequestException, ValueError, KeyError):
            return False

    try:
        retry_until(ready, STARTS_WITHIN_S, interval=0.1)
        opened = Browser(url, tmp_path / "chromium-profile")
        try:
            yield opened
        finally:
            opened.close()
    finally:
        stop_process(driver, seconds=10)


def test_a_person_taps_deny_in_chromium_and_the_dialog_is_refused_once(
        server: Any, session: Any, watcher: Watcher, isolated_env: Path, tmp_path: Path,
        browser: Browser) -> None:
    asking = asking_pane(session, watcher, isolated_env, tmp_path / "keys.log")

    with serving(server.socket_name) as url:
        browser.open(url)
        listed = browser.source()
        assert "api" in listed and "ls -la" in listed
        deny = browser.link("No")

        browser.click("a.o", "No")
        assert "Press it?" in browser.source() and asking.keys_read() == []
        browser.click("button")
        retry_until(lambda: "Pressed" in browser.source(), 30)
        retry_until(lambda: "PICKED No FOR ls -la" in asking.keys_read(), 10)

        browser.open(deny)  # the same link again: spent
        assert "used already" in browser.source()
    assert asking.keys_read().count("PICKED No FOR ls -la") == 1
