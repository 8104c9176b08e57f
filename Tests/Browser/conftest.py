"""Fixtures: the real viewline-server with its web listener, a TCP client on it,
and headless Chromium (Debian's `chromium` and `chromium-driver`) per test. A
failing test's screenshot and browser log are kept in $VIEWLINE_ARTIFACTS
(default .build/browser-artifacts)."""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
from typing import List, Optional

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "Tests" / "support"))
from line_client import LineClient  # noqa: E402
SERVER = os.environ.get("VIEWLINE_SERVER", str(ROOT / ".build" / "debug" / "viewline-server"))
ARTIFACTS = pathlib.Path(os.environ.get("VIEWLINE_ARTIFACTS", str(ROOT / ".build" / "browser-artifacts")))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """viewline-server on fixed free ports (so a restart comes back on them)."""

    def __init__(self, extra: Optional[List[str]] = None, web_port: Optional[int] = None, admin: bool = True):
        self.extra = extra or []
        self.admin = admin
        self.port = free_port()
        self.web_port = web_port or free_port()
        self.process: Optional[subprocess.Popen] = None
        self.clients: List[LineClient] = []
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}/"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [SERVER, "--port", str(self.port), "--web-port", str(self.web_port), "--db", ":memory:",
             "--demo", *(["--admin"] if self.admin else []), "--log-level", "warning", *self.extra],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        # `listening on`, then `web on` (a `metrics on` line may come between).
        first = self.process.stdout.readline().decode()
        second = self.process.stdout.readline().decode()
        if second.startswith("metrics on"):
            second = self.process.stdout.readline().decode()
        if not (first.startswith("listening on") and second.startswith("web on")):
            self.process.kill()  # never left running behind a failed start
            self.process.wait(10)
            raise AssertionError(f"the server did not start: {first!r} {second!r}")

    def tcp(self) -> LineClient:
        client = LineClient(self.port)
        self.clients.append(client)
        return client

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            self.process.wait(10)


@pytest.fixture
def server():
    running = Server()
    yield running
    for client in running.clients:
        client.sock.close()
    running.stop()


def chromium() -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1100,900"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    binary = shutil.which("chromium")
    if binary:
        options.binary_location = binary
    # Debian's driver, named explicitly: Selenium Manager would go to the network.
    driver = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    return webdriver.Chrome(options=options, service=Service(executable_path=driver))


@pytest.fixture
def page(request):
    driver = chromium()
    yield driver
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(ARTIFACTS / f"{request.node.name}.png"))
        (ARTIFACTS / f"{request.node.name}.log").write_text(
            "\n".join(json.dumps(entry) for entry in driver.get_log("browser")))
        print(f"screenshot and browser log: {ARTIFACTS / request.node.name}.*")
    driver.quit()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.report_call = report
