"""The page over https and its session over wss: with --tls-cert/--tls-key the web
listener serves both with the server's certificate (a throwaway self-signed one
here, which Chromium is told to accept)."""
from __future__ import annotations

import shutil
import subprocess
import tempfile

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from conftest import SERVER, free_port
from test_page import run, status, view, wait


@pytest.fixture
def https_url():
    directory = tempfile.mkdtemp()
    cert, key = f"{directory}/cert.pem", f"{directory}/key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    web_port = free_port()
    process = subprocess.Popen(
        [SERVER, "--port", "0", "--web-port", str(web_port), "--tls-cert", cert, "--tls-key", key,
         "--db", ":memory:", "--demo", "--log-level", "warning"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert process.stdout.readline().startswith(b"listening on")
    assert process.stdout.readline().startswith(b"web on https://")
    yield f"https://127.0.0.1:{web_port}/"
    process.terminate()
    process.wait(10)
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def trusting_page():
    options = webdriver.ChromeOptions()
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--ignore-certificate-errors"):
        options.add_argument(argument)
    binary = shutil.which("chromium")
    if binary:
        options.binary_location = binary
    driver = webdriver.Chrome(options=options, service=Service(executable_path=shutil.which("chromedriver") or "/usr/bin/chromedriver"))
    yield driver
    driver.quit()


def test_the_page_over_https_drives_its_session_over_wss(trusting_page, https_url):
    page = trusting_page
    page.get(https_url)
    wait(page, lambda: status(page) == "connected")
    assert page.execute_script("return location.protocol") == "https:"
    run(page, "search", query="pizza")
    section = view(page, "search")
    wait(page, lambda: section.find_elements(By.CSS_SELECTOR, "table tbody tr"))
    assert "pizza" in section.text.lower()
