"""A page on another loopback address, on the server's own port, is another site: its
WebSocket to the server is refused unless the server lists its origin with
--web-origin. The page is served by a plain HTTP server on 127.0.0.2 at the web
listener's port number; Chromium opens it and tries ws://127.0.0.1:PORT/ws."""
from __future__ import annotations

import http.server
import threading

import pytest

from conftest import Server, free_port
from test_page import wait

PAGE = b"""<!doctype html><title>other site</title><p id="result">pending</p><script>
const socket = new WebSocket(location.search.slice(1));
const result = document.getElementById("result");
socket.onopen = () => { socket.send("ping"); };
socket.onmessage = (event) => { if (event.data.includes('"re"')) result.textContent = "answered"; };
socket.onclose = () => { if (result.textContent === "pending") result.textContent = "refused"; };
</script>"""


class OtherSite:
    """A one-page HTTP server on 127.0.0.2:PORT (threaded: Chromium preconnects an idle socket)."""

    def __init__(self, port: int):
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(PAGE)))
                self.end_headers()
                self.wfile.write(PAGE)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.2", port), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def drive(page, port: int) -> str:
    site = OtherSite(port)
    try:
        page.get(f"http://127.0.0.2:{port}/?ws://127.0.0.1:{port}/ws")
        wait(page, lambda: page.find_element("id", "result").text != "pending")
        return page.find_element("id", "result").text
    finally:
        site.stop()


def test_a_page_on_another_loopback_address_cannot_open_the_socket(page):
    server = Server()
    try:
        assert drive(page, server.web_port) == "refused"
    finally:
        server.stop()


def test_the_same_page_opens_it_once_its_origin_is_listed(page):
    port = free_port()
    server = Server(["--web-origin", f"http://127.0.0.2:{port}"], web_port=port)
    try:
        assert drive(page, port) == "answered"
    finally:
        server.stop()
