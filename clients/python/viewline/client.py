"""A blocking client for the Viewline protocol."""
from __future__ import annotations

import collections
import json
import socket
import ssl
import time
from typing import Any, Callable, Deque, Dict, Iterator, List, Optional, Sequence, Tuple, cast

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

    def __init__(self, sock: socket.socket, on_message: Optional[Callable[[Message], None]] = None,
                 reconnect: bool = False, address: Optional[Tuple[str, int]] = None,
                 reconnect_attempts: int = 8, tls: Optional[ssl.SSLContext] = None,
                 nodes: Sequence[Tuple[str, int]] = ()) -> None:
        self._sock = sock
        self._nodes: List[Tuple[str, int]] = ([address] if address else []) + [n for n in nodes if n != address]
        self._tls = tls
        self._reconnect = reconnect
        self._address = address
        self._reconnect_attempts = reconnect_attempts
        #: How many times the connection dropped and the session was resumed.
        self.resumed = 0
        self._ended = False  # closed by us, or the server said bye: never resume
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
                on_message: Optional[Callable[[Message], None]] = None, reconnect: bool = False,
                reconnect_attempts: int = 8, tls: bool = False, ca_file: Optional[str] = None,
                nodes: Sequence[Tuple[str, int]] = ()) -> "Client":
        """Connect and read the welcome.

        With ``reconnect=True``, a dropped connection is reopened (with backoff) and the
        session resumed with ``attach`` from the last ``rev`` seen: events missed
        meanwhile arrive again, nothing twice. A command whose reply was lost in the
        drop raises ``ConnectionClosed`` (it may or may not have run); the client
        stays usable.

        With ``tls=True`` (or a ``ca_file``), the connection is TLS, verified against
        ``ca_file`` (a PEM file) or the system's trusted certificates.

        In a cluster, ``attach`` follows ``moved`` to the node that owns the session,
        and ``nodes`` lists the other nodes a reconnect tries when this one is gone
        (one of them restores the session).
        """
        context = ssl.create_default_context(cafile=ca_file) if tls or ca_file else None
        sock = cls._open((host, port), timeout, context)
        return cls(sock, on_message, reconnect=reconnect, address=(host, port),
                   reconnect_attempts=reconnect_attempts, tls=context, nodes=nodes)

    @staticmethod
    def _open(address: Tuple[str, int], timeout: float, tls: Optional[ssl.SSLContext]) -> socket.socket:
        sock = socket.create_connection(address, timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls is not None:
            sock = tls.wrap_socket(sock, server_hostname=address[0])
        return sock

    # -- context manager ------------------------------------------------------
    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._ended = True
        self._close_socket()

    def _close_socket(self) -> None:
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
        line = request.encode(request_id, name, args)
        try:
            self._sock.sendall(line)
        except OSError:
            if not self._reconnect or self._ended:
                raise ConnectionClosed() from None
            self._resume()  # the line never left: send it on the resumed connection
            self._sock.sendall(line)
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

    def attach(self, token: str, last_rev: Optional[int] = None) -> Dict[str, Any]:
        """Move this connection to the session that owns ``token``.

        With ``last_rev``, every event after it arrives again; otherwise a snapshot
        (every view and the presented alert). Returns ``{session, rev, replayed,
        snapshot}``; raises ``ViewlineError`` (``bad_token``) for a token that is not a
        live session's.
        """
        args: Dict[str, Any] = {"token": token}
        if last_rev is not None:
            args["lastRev"] = last_rev
        for _ in range(3):
            try:
                result = self._request("attach", args, 10)
            except ViewlineError as error:
                address = request.moved_address(error)
                if address is None:
                    raise
                self._switch_to(address)  # the session lives on another node: go there
                continue
            self.token = token
            self.session = result["session"]
            return result
        raise ViewlineError("moved", "the session kept moving between nodes")

    def _switch_to(self, address: Tuple[str, int]) -> None:
        """Replace the connection with one to ``address`` and read its welcome."""
        sock = self._open(address, 10, self._tls)
        try:
            self._sock.close()
        except OSError:
            pass
        self._sock, self._buffer, self.closed, self._address = sock, bytearray(), False, address
        welcome = self._read_once(10)
        if welcome.get("type") != "welcome":
            raise ConnectionClosed(f"the server refused the connection: {welcome.get('reason', welcome)}")

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
        resumed = self.resumed
        while True:
            message = self._read(max(0.0, deadline - time.monotonic()) or 0.001)
            if self.resumed != resumed:
                # The reply was lost with the old connection; the events are not.
                self._events.append(message)
                raise ConnectionClosed()
            if message.get("type") == "reply" and message.get("re") == request_id:
                return message
            if message.get("type") != "reply":
                self._events.append(message)

    def next_message(self, timeout: Optional[float] = 10) -> Message:
        """The next line from the server, whatever it is (events are not queued)."""
        return self._read(timeout)

    def _read(self, timeout: Optional[float]) -> Message:
        while True:
            try:
                return self._read_once(timeout)
            except (ConnectionClosed, ConnectionError):
                if not self._reconnect or self._address is None or self._ended:
                    raise
                self._resume()

    def _resume(self) -> None:
        """Reconnect with backoff and attach to this session from the last rev seen:
        the same node first, then the cluster's other ``nodes``; ``moved`` is followed."""
        assert self._address is not None
        candidates = [self._address] + [node for node in self._nodes if node != self._address]
        delay = 0.05
        for attempt in range(self._reconnect_attempts * len(candidates)):
            target = candidates[attempt % len(candidates)]
            try:
                self._switch_to(target)
                for _ in range(3):
                    self._sock.sendall(request.encode("_resume", "attach", {"token": self.token, "lastRev": self.state.rev}))
                    reply = self._read_once(10)
                    try:
                        request.result_of(reply)
                    except ViewlineError as error:
                        moved = request.moved_address(error)
                        if moved is None:
                            raise
                        self._switch_to(moved)
                        continue
                    self.resumed += 1
                    return
            except OSError:
                pass
            except ViewlineError as error:
                # A dead node may still count as alive for a moment, or the node cannot
                # reach its database yet: try again. Anything else (bad_token) is final.
                if error.code not in request.RETRYABLE_ATTACH + ("connection_closed",):
                    raise
            if attempt % len(candidates) == len(candidates) - 1:
                time.sleep(delay)
                delay = min(delay * 2, 2.0)
        raise ConnectionClosed()

    def _read_once(self, timeout: Optional[float]) -> Message:
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
                self._close_socket()
                raise ConnectionClosed()
            self._buffer += chunk
        index = self._buffer.index(b"\n")
        line = bytes(self._buffer[:index])
        del self._buffer[: index + 1]
        message = json.loads(line)
        if message.get("type") == "bye":
            self._ended = True
        self.state.observe(message)
        if self._on_message:
            self._on_message(message)
        return cast("Message", message)
