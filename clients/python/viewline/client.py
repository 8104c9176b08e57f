"""A blocking client for the Viewline protocol."""
from __future__ import annotations

import collections
import json
import socket
import time
from typing import Any, Callable, Deque, Dict, Iterator, Optional, cast

from .errors import ConnectionClosed, Timeout, ViewlineError
from . import request
from .state import SessionState

Message = Dict[str, Any]
Predicate = Callable[[Message], bool]


class Client:
    """One connection, one session.

    >>> with Client.connect(port=7878) as vl:
    ...     vl.command("search thai food")
    ...     results = vl.wait_for_display("search", lambda s: not s["loading"])
    """

    def __init__(self, sock: socket.socket, on_message: Optional[Callable[[Message], None]] = None) -> None:
        self._sock = sock
        self._buffer = bytearray()
        self._on_message = on_message
        self._events: Deque[Message] = collections.deque()
        self._next_id = 0
        self.state = SessionState()
        self.closed = False
        welcome = self._read(timeout=10)
        if welcome.get("type") != "welcome":
            raise ViewlineError("bad_welcome", f"expected welcome, got {welcome}")
        self.welcome: Message = welcome
        self.session: str = welcome["session"]
        self.token: str = welcome["token"]

    @classmethod
    def connect(cls, host: str = "127.0.0.1", port: int = 7878, timeout: float = 10,
                on_message: Optional[Callable[[Message], None]] = None) -> "Client":
        sock = socket.create_connection((host, port), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(sock, on_message)

    # -- context manager ------------------------------------------------------
    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            try:
                self._sock.close()
            except OSError:
                pass

    # -- state ----------------------------------------------------------------
    @property
    def views(self) -> Dict[str, Dict[str, Any]]:
        """The latest state of each view displayed so far."""
        return self.state.views

    @property
    def alert(self) -> Optional[Message]:
        """The presented alert, if any."""
        return self.state.alert

    # -- commands -------------------------------------------------------------
    def command(self, cmd: str, timeout: float = 10, **args: Any) -> Dict[str, Any]:
        """Run a command and return its ``result``; raises ``ViewlineError`` on failure.

        ``cmd`` is either a whole inline line (``"search thai food"``) or a command name
        with keyword arguments (``command("search", query="thai food")``). Either way it
        is sent in the JSON form with a fresh id.
        """
        name, args = request.resolve(cmd, args)
        return self._request(name, args, timeout)

    def _request(self, name: str, args: Dict[str, Any], timeout: float) -> Dict[str, Any]:
        self._next_id += 1
        request_id = self._next_id
        self._sock.sendall(request.encode(request_id, name, args))
        return request.result_of(self._reply_for(request_id, timeout))

    def send_line(self, line: str) -> None:
        """Send one raw line (inline or JSON); you read its reply with ``next_message``."""
        self._sock.sendall(line.encode("utf-8") + b"\n")

    def confirm(self, alert: Optional[str] = None, **fields: str) -> Dict[str, Any]:
        """Answer the presented alert (or ``alert``) with its confirm action."""
        args: Dict[str, Any] = {"alert": alert or request.presented_alert_id(self.state)}
        if fields:
            args["fields"] = fields
        return self._request("confirm", args, 10)

    def cancel(self, alert: Optional[str] = None) -> Dict[str, Any]:
        """Answer the presented alert (or ``alert``) with its cancel action."""
        return self._request("cancel", {"alert": alert or request.presented_alert_id(self.state)}, 10)

    def settle(self, timeout_ms: int = 10000) -> None:
        """Wait until the session runs no background work (the ``wait`` command)."""
        self._request("wait", {"timeout": timeout_ms}, timeout_ms / 1000 + 5)

    # -- events ---------------------------------------------------------------
    def events(self, timeout: Optional[float] = None) -> Iterator[Message]:
        """Yield events as they arrive (forever, or until ``timeout`` passes quietly)."""
        while True:
            try:
                yield self.next_event(timeout=timeout)
            except Timeout:
                return

    def next_event(self, timeout: Optional[float] = 10) -> Message:
        if self._events:
            return self._events.popleft()
        while True:
            message = self._read(timeout)
            if message.get("type") != "reply":
                return message

    def wait_for(self, predicate: Predicate, timeout: float = 10, what: str = "event") -> Message:
        """Return the next event (already queued or arriving) that matches ``predicate``.

        Events are consumed in order: those before the match are dropped, so
        successive waits move forward through the session's history.
        """
        deadline = time.monotonic() + timeout
        while True:
            while self._events:
                event = self._events.popleft()
                if predicate(event):
                    return event
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise Timeout(what)
            message = self._read(remaining)
            if message.get("type") != "reply" and predicate(message):
                return message

    def wait_for_display(self, view: str, predicate: Optional[Callable[[Dict[str, Any]], bool]] = None,
                         timeout: float = 10) -> Dict[str, Any]:
        """Wait for a display of ``view`` whose state matches; returns the state."""
        event = self.wait_for(
            lambda m: m.get("type") == "display" and m["view"] == view and (predicate is None or predicate(m["state"])),
            timeout, f"a display of {view}")
        return cast("Dict[str, Any]", event["state"])

    def wait_for_alert(self, timeout: float = 10) -> Message:
        return self.wait_for(lambda m: m.get("type") == "alert", timeout, "an alert")

    # -- reading --------------------------------------------------------------
    def _reply_for(self, request_id: Any, timeout: float) -> Message:
        deadline = time.monotonic() + timeout
        while True:
            message = self._read(max(0.0, deadline - time.monotonic()) or 0.001)
            if message.get("type") == "reply" and message.get("re") == request_id:
                return message
            if message.get("type") != "reply":
                self._events.append(message)

    def next_message(self, timeout: Optional[float] = 10) -> Message:
        """The next line from the server, whatever it is (events are not queued)."""
        return self._read(timeout)

    def _read(self, timeout: Optional[float]) -> Message:
        if self.closed:
            raise ConnectionClosed()
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buffer:
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise Timeout("a message from the server")
                self._sock.settimeout(remaining)
            else:
                self._sock.settimeout(None)
            try:
                chunk = self._sock.recv(65536)
            except socket.timeout:
                raise Timeout("a message from the server") from None
            if not chunk:
                self.close()
                raise ConnectionClosed()
            self._buffer += chunk
        index = self._buffer.index(b"\n")
        line = bytes(self._buffer[:index])
        del self._buffer[: index + 1]
        message = json.loads(line)
        self.state.observe(message)
        if self._on_message:
            self._on_message(message)
        return cast("Message", message)
