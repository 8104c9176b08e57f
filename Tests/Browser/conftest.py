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
import time
from typing import Callable, List, Optional

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

ROOT = pathlib.Path(__file__).resolve().parents[2]
SERVER = os.environ.get("VIEWLINE_SERVER", str(ROOT / ".build" / "debug" / "viewline-server"))
ARTIFACTS = pathlib.Path(os.environ.get("VIEWLINE_ARTIFACTS", str(ROOT / ".build" / "browser-artifacts")))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TCP:
    """A raw TCP protocol client: lines out, JSON lines in."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buffer = b""
        self.welcome = self.next()

    def send(self, line: str) -> None:
        self.sock.sendall(line.encode() + b"\n")

    def next(self) -> dict:
        while b"\n" not in self.buffer:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed")
            self.buffer += data
        line, self.buffer = self.buffer.split(b"\n", 1)
        return json.loads(line)

    def until(self, predicate: Callable[[dict], bool]) -> dict:
        while True:
            message = self.next()
            if predicate(message):
                return message

    def reply(self) -> dict:
        return self.until(lambda m: m.get("type") == "reply")


class Server:
    """viewline-server on fixed free ports (so a restart comes back on them)."""

    def __init__(self):
        self.port = free_port()
        self.web_port = free_port()
        self.process: Optional[subprocess.Popen] = None
        self.clients: List[TCP] = []
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}/"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [SERVER, "--port", str(self.port), "--web-port", str(self.web_port), "--db", ":memory:",
             "--demo", "--admin", "--log-level", "warning"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        first = self.process.stdout.readline().decode()
        second = self.process.stdout.readline().decode()
        assert first.startswith("listening on") and second.startswith("web on"), (first, second)

    def tcp(self) -> TCP:
        client = TCP(self.port)
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
