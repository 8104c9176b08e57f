"""A blocking client for the Viewline protocol."""
from __future__ import annotations

import collections
import json
import logging
import select
import socket
import ssl
import time
from typing import Any, Callable, Deque, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, cast

from . import queue, request, wire
from .backoff import Backoff, ExponentialBackoff
from .errors import (ConnectError, ConnectionClosed, MovedError, ProtocolError, Timeout, ViewlineError, bye_is_final,
                     parse_address)
from .messages import Help
from .state import SessionState

Message = Dict[str, Any]
Predicate = Callable[[Message], bool]
Address = Tuple[str, int]

log = logging.getLogger("viewline")


def _configure(sock: socket.socket, keepalive: bool) -> None:
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if keepalive:
        # A peer that vanished (power cut, cable, NAT timeout) is noticed within
        # about a minute of silence instead of never.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for name, value in (("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 3)):
            if hasattr(socket, name):
                sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)


def tls_context(tls: bool, ca_file: Optional[str]) -> Optional[ssl.SSLContext]:
    """A verifying TLS context for ``tls=True`` or a ``ca_file``; else None."""
    return ssl.create_default_context(cafile=ca_file) if tls or ca_file else None


class _Settings:
    """What both clients (``Client``, ``AsyncClient``) are told when made: the server
    and the cluster's other nodes, the timeouts, whether and how to resume, TLS, and
    how much of what the server sends they hold."""

    def __init__(self, host: str, port: int, *, timeout: float, connect_timeout: float,
                 reconnect: bool, reconnect_attempts: int, backoff: Optional[Backoff], nodes: Sequence[Any],
                 tls: bool, ca_file: Optional[str], on_message: Optional[Callable[[Message], None]],
                 keepalive: bool, max_queued_events: int, max_line_bytes: int) -> None:
        self._address: Address = (host, port)
        self._nodes = node_list(self._address, nodes)
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._reconnect = reconnect
        self._reconnect_attempts = reconnect_attempts
        self._backoff: Backoff = backoff or ExponentialBackoff()
        self._tls = tls_context(tls, ca_file)
        self._on_message = on_message
        self._keepalive = keepalive
        self._max_queued_events = wire.check_limit("max_queued_events", max_queued_events)
        self._max_line_bytes = wire.check_limit("max_line_bytes", max_line_bytes)
        #: The protocol error the client closed the connection for, if it did.
        self._failure: Optional[ProtocolError] = None

    def _fail(self, error: ProtocolError) -> ProtocolError:
        """Remembers ``error`` as the reason the connection is closed for good."""
        if self._failure is None:
            self._failure = error
            log.warning("viewline: %s", error.message)
        return error

    def _protocol_error(self) -> ProtocolError:
        """A fresh copy of the error the client closed the connection for."""
        assert self._failure is not None
        return ProtocolError(self._failure.code, self._failure.message)


def node_list(address: Address, nodes: Sequence[Any]) -> List[Address]:
    """``address`` first, then the other ``nodes`` (``(host, port)`` or ``"host:port"``)."""
    out = [address]
    for node in nodes:
        parsed = parse_address(node) if isinstance(node, str) else (str(node[0]), int(node[1]))
        if parsed is None:
            raise ValueError(f"not a node address: {node!r}")
        if parsed not in out:
            out.append(parsed)
    return out


class Client(_Settings):
    """One connection to a session, blocking.

    >>> with Client.connect(port=7878) as vl:
    ...     vl.command("search thai food")
    ...     results = vl.wait_for_display("search", lambda s: not s["loading"])

    Leaving the ``with`` block closes the connection; the session lives on on the
    server (detached, until it expires) and ``attach(token)`` from another client
    picks it up. ``quit()`` ends the session for good.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 7878, *,
                 timeout: float = 10.0, connect_timeout: float = 10.0,
                 reconnect: bool = False, reconnect_attempts: int = 8, backoff: Optional[Backoff] = None,
                 nodes: Sequence[Any] = (), tls: bool = False, ca_file: Optional[str] = None,
                 on_message: Optional[Callable[[Message], None]] = None,
                 health_check_interval: float = 0, keepalive: bool = True,
                 max_queued_events: int = wire.MAX_QUEUED_EVENTS, max_line_bytes: int = wire.MAX_LINE_BYTES) -> None:
        super().__init__(host, port, timeout=timeout, connect_timeout=connect_timeout, reconnect=reconnect,
                         reconnect_attempts=reconnect_attempts, backoff=backoff, nodes=nodes, tls=tls,
                         ca_file=ca_file, on_message=on_message, keepalive=keepalive,
                         max_queued_events=max_queued_events, max_line_bytes=max_line_bytes)
        self._health_check_interval = health_check_interval
        self._events: Deque[Message] = collections.deque(maxlen=self._max_queued_events)
        #: Events pushed out of the full queue (the oldest first) while a command
        #: waited for its reply: see ``max_queued_events``.
        self.dropped_events = 0
        #: How many times the connection dropped and the session was resumed.
        self.resumed = 0
        self.state = SessionState()
        self.closed = False
        #: The last ``bye`` the server sent, if any.
        self.bye: Optional[Message] = None
        self._ended = False  # closed by us, or the session is gone: never resume
        self._lines = wire.LineBuffer(self._max_line_bytes)
        self._line_limit: Optional[int] = None
        self._next_id = 0
        self._last_io = time.monotonic()
        self._sock = self._open(self._address)
        welcome = self._welcome()
        self.welcome: Message = welcome
        self.session: str = welcome["session"]
        self.token: str = welcome["token"]

    @classmethod
    def connect(cls, host: str = "127.0.0.1", port: int = 7878, **options: Any) -> "Client":
        """Connect and read the welcome (raises ``ConnectError`` if that fails).

        Options (keyword-only, so they never collide with a command's arguments):

        - ``timeout`` (10 s): the default wait for a command's reply and for events;
          each call takes its own ``timeout=``.
        - ``connect_timeout`` (10 s): TCP connect, TLS handshake and the welcome.
        - ``reconnect``: a dropped connection, or a ``bye`` that leaves the session
          alive (a node shutting down or handing the session over), is reopened and
          the session resumed with ``attach`` from the last ``rev`` seen: events
          missed meanwhile arrive again, nothing twice. A command the server did not
          answer before a ``bye`` never ran: it is sent again on the resumed
          connection. A command whose reply was lost with a connection that dropped
          without a ``bye`` raises ``ConnectionClosed`` (it may or may not have run);
          the client stays usable. ``reconnect_attempts`` rounds over the nodes, waiting
          ``backoff(round)`` seconds between rounds (exponential with jitter).
        - ``nodes``: the cluster's other nodes (``(host, port)`` or ``"host:port"``),
          tried when this one is gone; ``attach`` follows ``moved`` by itself.
        - ``tls=True`` or ``ca_file``: TLS, verified against ``ca_file`` (PEM) or the
          system's trusted certificates.
        - ``health_check_interval`` (s): before a command, if the connection has been
          idle that long, ``ping`` it first and resume if it is dead (redis-py's
          option of the same name). ``keepalive`` (on): TCP keepalive probes.
        - ``on_message``: called with every message from the server.
        - ``max_queued_events`` (1,024): events read from the socket that no
          ``next_event``/``wait_for``/``events()`` has taken yet wait in a queue of at
          most this many. The client reads only inside a call, and a command checks
          what arrived while the client was idle only until the queue is full: the
          rest stays in the socket (TCP backpressure; the server disconnects a client
          that leaves more than 1 MiB unread, PROTOCOL §8, and ``reconnect`` resumes
          from the last ``rev`` read). While a command waits for its reply, the client
          reads on to it: an event that finds the queue full pushes out the oldest
          (counted in ``dropped_events``), so a reply always arrives. ``views``,
          ``alert`` and ``rev`` reflect every message read.
        - ``max_line_bytes`` (1 MiB, the most a server holds for one connection by default, `--max-output-bytes`): the
          longest line taken from the server, not counting its line ending. A longer
          one is never buffered: the client closes the connection and raises
          ``ProtocolError`` (``message_too_long``), and does not resume. Raise it for
          an app whose views' states can be larger.

        A message the client cannot act on (a ``rev`` that is not a whole number from 0
        to 2**53 - 1, a ``display`` without a ``view`` name or a ``state`` object, …)
        closes the connection the same way, with ``ProtocolError`` (``bad_message``);
        a line that is not a JSON object is skipped with a logged warning.
        """
        return cls(host, port, **options)

    # -- connection -------------------------------------------------------------
    def _open(self, address: Address) -> socket.socket:
        try:
            sock = socket.create_connection(address, timeout=self._connect_timeout)
        except (OSError, ValueError) as error:  # ValueError: a host name that cannot be one (IDNA)
            raise ConnectError(f"cannot connect to {address[0]}:{address[1]}: {error}") from error
        try:
            _configure(sock, self._keepalive)
            if self._tls is not None:
                sock = self._tls.wrap_socket(sock, server_hostname=address[0])
        except (OSError, ssl.SSLError) as error:
            sock.close()
            raise ConnectError(f"TLS with {address[0]}:{address[1]} failed: {error}") from error
        return sock

    def _welcome(self) -> Message:
        self.closed = False
        try:
            message = self._read_once(self._connect_timeout)
        except Timeout:
            self._close_socket()
            raise ConnectError("no welcome from the server in time") from None
        except ProtocolError as error:
            raise ConnectError(f"the server broke the protocol before its welcome: {error.message}") from error
        except ConnectionClosed as error:
            raise ConnectError(f"the server closed the connection before its welcome: {error.message}", error.bye) from None
        if message.get("type") == "welcome":
            self._line_limit = request.line_limit(message)  # each node says its own
        if message.get("type") != "welcome":
            self._close_socket()
            if message.get("type") == "bye":
                raise ConnectError(f"the server refused the connection: {message.get('reason')}", message)
            raise ConnectError(f"expected a welcome, got {str(message)[:200]}")
        return message

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection; the session lives on on the server until it expires."""
        self._ended = True
        self._close_socket()

    def quit(self, *, timeout: Optional[float] = None) -> None:
        """End the session for good (``quit``), then close the connection."""
        try:
            self._request("quit", {}, timeout)
            while not self.closed:  # the `bye` that follows, then the server closes
                self._read_once(timeout or self._timeout)
        except ConnectionClosed:
            pass
        finally:
            self.close()

    def _close_socket(self) -> None:
        if not self.closed:
            self.closed = True
            try:
                self._sock.close()
            except OSError:
                pass

    def drop(self) -> None:
        """Cut the connection as a network failure would (no ``quit``): for tests and
        demos of resuming."""
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # -- state ----------------------------------------------------------------
    @property
    def views(self) -> Dict[str, Dict[str, Any]]:
        """The latest state of each view displayed so far (what arrived while the client
        was idle included: read, without waiting, first)."""
        self._take_waiting()
        return self.state.views

    @property
    def alert(self) -> Optional[Message]:
        """The presented alert, if any (what arrived while the client was idle included)."""
        self._take_waiting()
        return self.state.alert

    @property
    def rev(self) -> int:
        """The highest ``rev`` seen: where a resumed session picks up."""
        return self.state.rev

    @property
    def queued_events(self) -> int:
        """How many events wait in the queue (at most ``max_queued_events``)."""
        return len(self._events)

    # -- commands -------------------------------------------------------------
    def command(self, cmd: str, args: Optional[Mapping[str, Any]] = None, /, *,
                timeout: Optional[float] = None) -> Dict[str, Any]:
        """Run a command and return its ``result``; a failure raises ``ViewlineError``
        (a subclass for the codes callers act on).

        ``command("add buy milk")`` sends the line as typed and the server parses it,
        so any app's commands work; ``command("add", {"text": "buy milk"})`` sends a
        command name with JSON arguments. ``timeout`` overrides the client's default.
        """
        return self._request(cmd, args, timeout)

    def _request(self, cmd: str, args: Optional[Mapping[str, Any]], timeout: Optional[float]) -> Dict[str, Any]:
        if self._failure is not None:
            raise self._protocol_error()
        if self._ended or (self.closed and not self._reconnect):
            raise ConnectionClosed("the client is closed", self.bye, self._ended and self.bye is not None)
        self._take_waiting()
        if self._failure is not None:
            raise self._protocol_error()
        if self._ended and not self._reconnect:
            raise ConnectionClosed("the session ended", self.bye, True)
        if self.closed or self.bye is not None or (
                self._health_check_interval and time.monotonic() - self._last_io >= self._health_check_interval):
            self._check_health()
        self._next_id += 1
        request_id = self._next_id
        line = request.encode(request_id, cmd, args)
        request.check_length(line, self._line_limit)
        try:
            self._sock.sendall(line)
        except OSError:
            if not self._reconnect or self._ended:
                self._close_socket()
                raise ConnectionClosed() from None
            self._resume()  # the line never left: send it on the resumed connection
            self._sock.sendall(line)
        self._last_io = time.monotonic()
        result = request.result_of(self._reply_for(request_id, self._timeout if timeout is None else timeout, line=line))
        self.token = request.new_token(cmd, args, result) or self.token
        return result

    def _take_waiting(self) -> None:
        """Reads what the server sent while the client was idle, without waiting for
        more (events are queued, a ``bye`` noted), so a command never goes out on a
        connection whose server already said ``bye`` (a node that drained and shut
        down while the client was quiet): it goes out on the resumed one instead.
        Stops at a full queue: what is left stays in the socket (backpressure); a
        ``bye`` behind it is handled as one after the command was sent."""
        while not self.closed and self.bye is None and len(self._events) < self._max_queued_events:
            if not self._lines.has_line:
                pending = isinstance(self._sock, ssl.SSLSocket) and self._sock.pending() > 0
                if not pending and not select.select([self._sock], [], [], 0)[0]:
                    return
            try:
                message = self._read_once(1.0)
            except (Timeout, ConnectionClosed):
                return
            if message.get("type") != "reply":  # a reply here is a timed-out command's, late
                self._queue(message)

    def _check_health(self) -> None:
        """A ``ping`` on a connection idle for a while (or closed): resume if it is dead.
        After a ``bye`` the server is closing the connection: resume at once."""
        if self.bye is not None:
            self._close_socket()
        if not self.closed:
            self._next_id += 1
            try:
                self._sock.sendall(request.encode(self._next_id, "ping", {}))
                self._reply_for(self._next_id, min(self._timeout, 5.0), resume=False)
                return
            except (ConnectionClosed, Timeout, OSError):
                self._close_socket()
        if self._failure is not None:
            raise self._protocol_error()
        if not self._reconnect or self._ended:
            raise ConnectionClosed(bye=self.bye, session_ended=self._ended)
        self._resume()

    def send_line(self, line: str) -> None:
        """Send one raw line (inline or JSON) as is; read its reply with ``next_message``."""
        self._sock.sendall(line.encode("utf-8") + b"\n")

    def confirm(self, fields: Optional[Mapping[str, str]] = None, *, alert: Optional[str] = None,
                timeout: Optional[float] = None) -> Dict[str, Any]:
        """Answer the presented alert (or ``alert``) with its confirm action, filling
        its input ``fields`` (``{"user": "alice", "password": "…"}``)."""
        if alert is None:
            self._take_waiting()  # an alert that arrived while the client was idle
        return self._request("confirm", request.confirm_args(self.state, fields, alert), timeout)

    def cancel(self, *, alert: Optional[str] = None, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Answer the presented alert (or ``alert``) with its cancel action."""
        if alert is None:
            self._take_waiting()  # an alert that arrived while the client was idle
        return self._request("cancel", {"alert": alert or request.presented_alert_id(self.state)}, timeout)

    def end_others(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """End every other connection to this session (they get ``bye`` ``revoked``)
        and give it a new token, kept here for resuming: a token or link someone else
        holds no longer joins it. Returns ``{ended, token}``."""
        return self._request("end-others", {}, timeout)

    def attach(self, token: str, last_rev: Optional[int] = None, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Move this connection to the session that owns ``token``.

        With ``last_rev``, every event after it arrives again; otherwise a snapshot
        (every view and the presented alert; ``views``, ``alert`` and ``rev`` start
        over). Returns ``{session, rev, replayed, snapshot}``; raises ``ViewlineError``
        (``bad_token``) for a token that is not a live session's. Follows ``moved``.
        """
        args: Dict[str, Any] = {"token": token}
        if last_rev is not None:
            args["lastRev"] = last_rev
        for _ in range(3):
            try:
                result = self._request("attach", args, timeout)
            except MovedError as error:
                if error.address is None:
                    raise
                self._switch_to(error.address)  # the session lives on another node: go there
                continue
            self.token = token
            self.session = result["session"]
            return result
        raise ViewlineError("moved", "the session kept moving between nodes")

    def _switch_to(self, address: Address) -> None:
        """Replace the connection with one to ``address`` and read its welcome."""
        sock = self._open(address)
        self._close_socket()
        self._sock, self._lines, self._address = sock, wire.LineBuffer(self._max_line_bytes), address
        self._welcome()

    def help(self, *, timeout: Optional[float] = None) -> Help:
        """The server's declarations (``help``): every command with its typed arguments
        (kind, bounds, required, secure), its view and whether it is live, paging or
        its view's primary action; every view, backend and error code."""
        return cast(Help, self._request("help", {}, timeout))

    def settle(self, timeout_ms: int = 10000) -> None:
        """Wait until the session runs no background work (the ``wait`` command)."""
        self._request("wait", {"timeout": timeout_ms}, timeout_ms / 1000 + 5)

    # -- events ---------------------------------------------------------------
    def events(self, timeout: Optional[float] = None) -> Iterator[Message]:
        """Yield events as they arrive: forever, until ``timeout`` passes quietly, or
        until the connection closes for good (``ProtocolError`` when the client
        closed it because the server broke the protocol)."""
        while True:
            try:
                yield self.next_event(timeout=timeout)
            except ProtocolError:
                raise
            except (Timeout, ConnectionClosed):
                return

    def next_event(self, timeout: Optional[float] = None) -> Message:
        """The next event (queued or arriving); ``timeout`` defaults to the client's."""
        if self._events:
            return self._events.popleft()
        while True:
            message = self._read(self._timeout if timeout is None else timeout)
            if message.get("type") != "reply":
                return message

    def wait_for(self, predicate: Predicate, *, timeout: Optional[float] = None, what: str = "event") -> Message:
        """Return the next event (already queued or arriving) that matches ``predicate``.

        Events are consumed in order: those before the match are dropped, so
        successive waits move forward through the session's history. A wait that
        ends without a match (``Timeout``, the connection closed, an exception from
        ``predicate``) takes nothing: the events it went past stay queued.
        """
        deadline = time.monotonic() + (self._timeout if timeout is None else timeout)
        passed: List[Message] = []  # what the wait went past: kept if it finds nothing
        try:
            while True:
                while self._events:
                    event = self._events.popleft()
                    if predicate(event):
                        return event
                    passed.append(event)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise Timeout(what)
                message = self._read(remaining)
                if message.get("type") != "reply":
                    if predicate(message):
                        return message
                    passed.append(message)
        except BaseException:
            # A wait that ends without its event takes nothing: what it went past is
            # queued again, in order, the newest kept when that is more than the queue holds.
            queue.put_back(self._events, passed)
            raise

    def wait_for_display(self, view: str, predicate: Optional[Callable[[Dict[str, Any]], bool]] = None, *,
                         timeout: Optional[float] = None) -> Dict[str, Any]:
        """The state of ``view`` once it matches: at once when its latest state does
        (``views``; the queued events up to its last display are taken); else the first
        matching display queued, else the next to arrive."""
        self._take_waiting()
        state = self.state.views.get(view)
        if state is not None and (predicate is None or predicate(state)):
            queue.take_through_last(self._events, lambda m: m.get("type") == "display" and m.get("view") == view)
            return state
        event = self.wait_for(
            lambda m: m.get("type") == "display" and m["view"] == view and (predicate is None or predicate(m["state"])),
            timeout=timeout, what=f"a display of {view}")
        return cast("Dict[str, Any]", event["state"])

    def wait_for_alert(self, *, timeout: Optional[float] = None) -> Message:
        """The alert to answer: the presented one at once (``alert``), even if an
        earlier wait went past its event; else the next to arrive. An alert received
        that is no longer presented (answered elsewhere, dismissed) is not returned."""
        self._take_waiting()
        presented = self.state.alert
        if presented is not None:
            queue.take_through_last(self._events, lambda m: m.get("type") == "alert" and m.get("id") == presented.get("id"))
            return presented
        return self.wait_for(lambda m: m.get("type") == "alert" and self.state.alert is not None
                             and self.state.alert.get("id") == m.get("id"), timeout=timeout, what="an alert")

    # -- reading --------------------------------------------------------------
    def _queue(self, message: Message) -> None:
        if len(self._events) == self._events.maxlen:
            self.dropped_events += 1
        self._events.append(message)

    def _reply_for(self, request_id: Any, timeout: float, resume: bool = True, line: Optional[bytes] = None) -> Message:
        deadline = time.monotonic() + timeout
        resent = 0
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise Timeout(f"the reply to command {request_id}")
            try:
                message = self._read_once(remaining)
            except ConnectionClosed:
                if not resume or not self._reconnect or self._ended:
                    raise
                # A server answers every command it began before it says bye
                # (PROTOCOL §4): no reply before a bye means the command never ran.
                said_bye = self.bye is not None
                # The events are not lost: the session resumes from the last rev seen.
                self._resume()
                if said_bye and line is not None and resent < self._reconnect_attempts:
                    resent += 1
                    self._sock.sendall(line)  # never ran: sent again on the resumed connection
                    self._last_io = time.monotonic()
                    continue
                raise ConnectionClosed("the connection dropped before the reply; the command may or may not have run") from None
            if message.get("type") == "reply":
                if message.get("re") == request_id:
                    return message
                continue  # the late reply of a command that timed out
            self._queue(message)

    def next_message(self, timeout: Optional[float] = None) -> Message:
        """The next line from the server, whatever it is (events are not queued)."""
        return self._read(self._timeout if timeout is None else timeout)

    def _read(self, timeout: Optional[float]) -> Message:
        while True:
            try:
                return self._read_once(timeout)
            except ConnectionClosed:
                if not self._reconnect or self._ended:
                    raise
                self._resume()

    def _resume(self) -> None:
        """Reconnect with backoff and attach to this session from the last rev seen:
        the same node first, then the cluster's other ``nodes``; ``moved`` is followed."""
        self._close_socket()
        candidates = [self._address] + [node for node in self._nodes if node != self._address]
        for attempt in range(self._reconnect_attempts * len(candidates)):
            target = candidates[attempt % len(candidates)]
            try:
                self._switch_to(target)
                for _ in range(3):
                    self._sock.sendall(request.encode("_resume", "attach", {"token": self.token, "lastRev": self.state.rev}))
                    reply = self._read_once(self._connect_timeout)
                    try:
                        request.result_of(reply)
                    except MovedError as error:
                        if error.address is None:
                            raise
                        self._switch_to(error.address)
                        continue
                    self.resumed += 1
                    self.bye = None
                    return
            except (ConnectionClosed, Timeout):
                self._close_socket()
                if self._failure is not None:
                    raise self._protocol_error() from None
            except ViewlineError as error:
                self._close_socket()
                # A dead node may still count as alive for a moment, or the node cannot
                # reach its database yet: try again. Anything else (bad_token) is final.
                if error.code not in request.RETRYABLE_ATTACH:
                    self._ended = True
                    raise ConnectionClosed(f"the session could not be resumed: {error.message}", self.bye, True) from None
            if attempt % len(candidates) == len(candidates) - 1:
                time.sleep(self._backoff(attempt // len(candidates)))
        self._ended = True
        raise ConnectionClosed("the session could not be resumed: no node answered", self.bye)

    def _read_once(self, timeout: Optional[float]) -> Message:
        while True:
            if self.closed:
                if self._failure is not None:
                    raise self._protocol_error()
                raise ConnectionClosed(bye=self.bye, session_ended=self._ended and self.bye is not None)
            deadline = None if timeout is None else time.monotonic() + timeout
            line = self._lines.pop()
            while line is None:
                if deadline is not None:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise Timeout("a message from the server")
                    self._sock.settimeout(remaining)
                else:
                    self._sock.settimeout(None)
                try:
                    chunk = self._sock.recv(self._lines.room())
                except socket.timeout:
                    raise Timeout("a message from the server") from None
                except OSError:
                    chunk = b""
                if not chunk:
                    self._close_socket()
                    raise ConnectionClosed(bye=self.bye, session_ended=self._ended and self.bye is not None)
                try:
                    self._lines.feed(chunk)
                except ProtocolError as error:
                    raise self._close_for(error) from None
                line = self._lines.pop()
            self._last_io = time.monotonic()
            message = wire.parse(line)
            if message is None:
                log.warning("viewline: ignored a line from the server that is not a JSON object: %r", line[:200])
                continue
            try:
                wire.check(message)
            except ProtocolError as error:
                raise self._close_for(error) from None
            if message.get("type") == "bye":
                self.bye = message
                if bye_is_final(message):
                    self._ended = True
            self.state.observe(message)
            if self._on_message:
                self._on_message(message)
            return message

    def _close_for(self, error: ProtocolError) -> ProtocolError:
        """Closes the connection for good: the server broke the protocol."""
        self._ended = True
        self._close_socket()
        return self._fail(error)
