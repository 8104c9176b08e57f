"""An asyncio client for the Viewline protocol."""
from __future__ import annotations

import asyncio
import collections
import logging
import socket
import ssl
from typing import Any, AsyncIterator, Callable, Deque, Dict, Generator, List, Mapping, Optional, Sequence, Set, Tuple, cast

from . import queue, request, wire
from .backoff import Backoff
from .client import _configure, _Settings
from .errors import (ConnectError, ConnectionClosed, MovedError, ProtocolError, Timeout, ViewlineError, bye_is_final,
                     error_from_reply)
from .messages import Help
from .state import SessionState

Message = Dict[str, Any]
Address = Tuple[str, int]

log = logging.getLogger("viewline")


class _EventStream:
    """The events one reader has not taken yet: at most ``limit``. The client stops
    reading the socket while a queue that holds it back is full; when it reads on
    anyway (someone waits for a reply), an event pushes out the oldest."""

    def __init__(self, limit: int, taken: Callable[[], None], dropped: Callable[["_EventStream"], None],
                 backlog: Sequence[Message] = ()) -> None:
        self._items: Deque[Message] = collections.deque(backlog, maxlen=limit)
        self._limit = limit
        self._taken = taken
        self._dropped = dropped
        self._ready = asyncio.Event()
        self.closed = False
        self.error: Optional[ProtocolError] = None
        if self._items:
            self._ready.set()

    def __len__(self) -> int:
        return len(self._items)

    @property
    def full(self) -> bool:
        return len(self._items) >= self._limit

    def put(self, message: Message) -> None:
        if self.full:
            self._dropped(self)
        self._items.append(message)
        self._ready.set()

    def put_back(self, events: List[Message]) -> None:
        """Queues `events` again before the rest, in order (a wait that found nothing);
        the newest are kept when that is more than the queue holds."""
        if not events:
            return
        queue.put_back(self._items, events)
        self._ready.set()

    def take_through_last(self, taken: Callable[[Message], bool]) -> None:
        """Drops the events up to and including the last one ``taken`` matches."""
        dropped = queue.take_through_last(self._items, taken)
        if not self._items:
            self._ready.clear()
        if dropped:
            self._taken()

    def take_all(self) -> List[Message]:
        items = list(self._items)
        self._items.clear()
        self._ready.clear()
        self._taken()
        return items

    def close(self, error: Optional[ProtocolError] = None) -> None:
        self.closed = True
        self.error = error
        self._ready.set()

    async def get(self) -> Message:
        """The next event; once closed and empty, ``ConnectionClosed`` (the
        ``ProtocolError`` the client closed the connection for, if it did)."""
        while not self._items:
            if self.closed:
                if self.error is not None:
                    raise ProtocolError(self.error.code, self.error.message)
                raise ConnectionClosed()
            self._ready.clear()
            await self._ready.wait()
        item = self._items.popleft()
        self._taken()
        return item


class _LineReader:
    """A connection's lines, none longer than the limit (``wire.LineBuffer``): it reads
    at most what the unfinished line may still grow by, and only when asked."""

    def __init__(self, stream: asyncio.StreamReader, limit: int) -> None:
        self._stream = stream
        self._lines = wire.LineBuffer(limit)

    async def readline(self) -> Optional[bytes]:
        """The next line; None at the end of the connection; ``ProtocolError`` for one too long."""
        while True:
            line = self._lines.pop()
            if line is not None:
                return line
            chunk = await self._stream.read(self._lines.room())
            if not chunk:
                return None
            self._lines.feed(chunk)


class AsyncClient(_Settings):
    """The asyncio twin of ``Client``: a reader task routes replies to their
    command by id and hands events to ``wait_for`` and to each ``events()`` reader.

    >>> async with AsyncClient.connect(port=7878) as vl:
    ...     await vl.command("search thai food")
    ...     async for event in vl.events(): ...

    ``await AsyncClient.connect(...)`` gives a connected client too (close it with
    ``aclose()``). Leaving ``async with`` closes the connection; the session lives on
    on the server until it expires (``quit()`` ends it). Options are those of
    ``Client.connect``, plus ``ping_interval`` (s): a ``ping`` after that much
    silence, and a resume when it gets no reply within ``timeout``.

    Backpressure (``max_queued_events``, 1,024): events wait for ``wait_for`` in one
    queue, and for each ``events()`` loop in its own, each of at most that many. The
    reader task stops reading the socket while a queue that holds it back is full,
    and goes on once an event is taken (TCP holds the rest; the server disconnects a
    client that leaves more than 1 MiB unread, and ``reconnect`` resumes from the
    last ``rev`` read). The queues that hold it back are those of the ``events()``
    loops when there are any; otherwise ``wait_for``'s, unless an ``on_message``
    callback sees every message (that queue then keeps the newest). While a command
    waits for its reply or a ``wait_for`` waits, the reader reads on whatever is
    full, and an event that finds a queue full pushes out its oldest (counted in
    ``dropped_events``): a command never waits on events nobody reads. An
    ``events()`` loop that stops reading without ending (``break`` ends it) holds
    the client back. ``views``, ``alert`` and ``rev`` reflect every message read.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 7878, *,
                 timeout: float = 10.0, connect_timeout: float = 10.0,
                 reconnect: bool = False, reconnect_attempts: int = 8, backoff: Optional[Backoff] = None,
                 nodes: Sequence[Any] = (), tls: bool = False, ca_file: Optional[str] = None,
                 on_message: Optional[Callable[[Message], None]] = None,
                 ping_interval: float = 0, keepalive: bool = True,
                 max_queued_events: int = wire.MAX_QUEUED_EVENTS, max_line_bytes: int = wire.MAX_LINE_BYTES) -> None:
        super().__init__(host, port, timeout=timeout, connect_timeout=connect_timeout, reconnect=reconnect,
                         reconnect_attempts=reconnect_attempts, backoff=backoff, nodes=nodes, tls=tls,
                         ca_file=ca_file, on_message=on_message, keepalive=keepalive,
                         max_queued_events=max_queued_events, max_line_bytes=max_line_bytes)
        self._ping_interval = ping_interval
        self.state = SessionState()
        self.closed = True  # until connected
        self.welcome: Message = {}
        self._line_limit: Optional[int] = None
        self.session = ""
        self.token = ""
        #: The last ``bye`` the server sent, if any.
        self.bye: Optional[Message] = None
        #: How many times the connection dropped and the session was resumed.
        self.resumed = 0
        self._reader: Optional[_LineReader] = None
        self._writer: Optional[asyncio.StreamWriter] = None
        self._pending: Dict[Any, "asyncio.Future[Message]"] = {}
        #: The line of each pending command: sent again after a ``bye`` it was not answered before.
        self._lines: Dict[Any, bytes] = {}
        self._stream: Optional[_EventStream] = None
        self._subscribers: Set[_EventStream] = set()
        self._next_id = 0
        self._task: Optional["asyncio.Task[None]"] = None
        self._pinger: Optional["asyncio.Task[None]"] = None
        self._ended = False  # closed by us, or the session is gone: never resume
        self._resuming: Optional["asyncio.Future[None]"] = None
        self._heard = 0.0
        self._wake: Optional[asyncio.Event] = None  # set when the reader may go on (made in the loop)
        self._paused = False  # the reader waits for a full queue to be read
        self._waiting = 0  # wait_for calls under way
        self._closing = False
        self._dropped = 0

    @classmethod
    def connect(cls, host: str = "127.0.0.1", port: int = 7878, **options: Any) -> "AsyncClient":
        """A client to ``await`` (connects and reads the welcome, raising
        ``ConnectError`` if that fails) or to use in ``async with``."""
        return cls(host, port, **options)

    def __await__(self) -> Generator[Any, None, "AsyncClient"]:
        return self._start().__await__()

    async def __aenter__(self) -> "AsyncClient":
        return await self._start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    async def _start(self) -> "AsyncClient":
        if self._task is not None:
            return self
        loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._stream = self._new_stream()
        self._reader, self._writer = await self._open(self._address)
        try:
            welcome = await asyncio.wait_for(self._read(self._reader), self._connect_timeout)
        except asyncio.TimeoutError:
            self._writer.close()
            raise ConnectError("no welcome from the server in time") from None
        except ProtocolError as error:
            self._writer.close()
            raise ConnectError(f"the server broke the protocol before its welcome: {error.message}") from error
        if welcome is None or welcome.get("type") != "welcome":
            self._writer.close()
            if welcome is not None and welcome.get("type") == "bye":
                raise ConnectError(f"the server refused the connection: {welcome.get('reason')}", welcome)
            raise ConnectError(f"expected a welcome, got {str(welcome)[:200]}")
        self.welcome = welcome
        self._line_limit = request.line_limit(welcome)
        self.session = welcome["session"]
        self.token = welcome["token"]
        self.closed = False
        self._heard = loop.time()
        self._task = asyncio.ensure_future(self._pump())
        if self._ping_interval > 0:
            self._pinger = asyncio.ensure_future(self._ping_when_quiet())
        return self

    async def _open(self, address: Address) -> Tuple[_LineReader, asyncio.StreamWriter]:
        try:
            # The stream's own limit only sets how much it buffers before it stops
            # reading the socket (twice this); lines are split and bounded by _LineReader.
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(address[0], address[1], limit=wire.READ_SIZE, ssl=self._tls,
                                        server_hostname=address[0] if self._tls else None),
                self._connect_timeout)
        except asyncio.TimeoutError:
            raise ConnectError(f"cannot connect to {address[0]}:{address[1]}: timed out") from None
        except (OSError, ssl.SSLError, ValueError) as error:  # ValueError: a host name that cannot be one
            raise ConnectError(f"cannot connect to {address[0]}:{address[1]}: {error}") from error
        sock = writer.get_extra_info("socket")
        if sock is not None:
            _configure(cast(socket.socket, sock), self._keepalive)
        return _LineReader(reader, self._max_line_bytes), writer

    def _new_stream(self, backlog: Sequence[Message] = ()) -> _EventStream:
        return _EventStream(self._max_queued_events, self._nudge, self._count_drop, backlog)

    def _count_drop(self, stream: _EventStream) -> None:
        if self._holds_back(stream):
            self._dropped += 1

    def _holds_back(self, stream: _EventStream) -> bool:
        """Whether a full ``stream`` stops the reader: an ``events()`` loop's when there
        are any; otherwise ``wait_for``'s, unless ``on_message`` sees every event."""
        if self._subscribers:
            return stream in self._subscribers
        return stream is self._stream and self._on_message is None

    def _nudge(self) -> None:
        """Something changed that may let a paused reader go on."""
        if self._wake is not None:
            self._wake.set()

    def _must_pause(self) -> bool:
        """Whether the reader waits before reading the next message (backpressure)."""
        if self._closing or self._waiting or any(not future.done() for future in self._pending.values()):
            return False  # someone waits for what comes next: read on
        streams = [self._stream] if self._stream is not None else []
        return any(stream.full and self._holds_back(stream) for stream in streams + list(self._subscribers))

    async def aclose(self) -> None:
        """Close the connection; the session lives on on the server until it expires.
        Commands still waiting for a reply raise ``ConnectionClosed``."""
        self._ended = True
        self._closing = True
        self._nudge()
        if self._pinger:
            self._pinger.cancel()
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except (OSError, ssl.SSLError):
                pass
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), 1)
            except (asyncio.TimeoutError, asyncio.CancelledError):
                self._task.cancel()
        self._finish()

    async def close(self) -> None:
        """Same as ``aclose()``."""
        await self.aclose()

    async def quit(self, *, timeout: Optional[float] = None) -> None:
        """End the session for good (``quit``), then close the connection."""
        try:
            await self._request("quit", {}, timeout)
        except ConnectionClosed:
            pass
        finally:
            await self.aclose()

    def drop(self) -> None:
        """Cut the connection as a network failure would: for tests and demos of resuming."""
        if self._writer is not None:
            self._writer.transport.abort()

    @property
    def views(self) -> Dict[str, Dict[str, Any]]:
        """The latest state of each view displayed so far."""
        return self.state.views

    @property
    def alert(self) -> Optional[Message]:
        """The presented alert, if any."""
        return self.state.alert

    @property
    def rev(self) -> int:
        """The highest ``rev`` seen."""
        return self.state.rev

    @property
    def dropped_events(self) -> int:
        """Events pushed out of a full queue that holds the reader back (its oldest)
        while a command or a ``wait_for`` waited: see the class's note on backpressure.
        (``wait_for``'s queue, when it does not hold the reader back, keeps the newest
        events without counting the others.)"""
        return self._dropped

    @property
    def queued_events(self) -> int:
        """How many events wait in the fullest queue (``wait_for``'s or an
        ``events()`` loop's): at most ``max_queued_events``."""
        return max([len(self._stream) if self._stream else 0] + [len(stream) for stream in self._subscribers])

    async def command(self, cmd: str, args: Optional[Mapping[str, Any]] = None, /, *,
                      timeout: Optional[float] = None) -> Dict[str, Any]:
        """Run a command and return its result: ``command("add buy milk")`` (a line as
        typed, parsed by the server) or ``command("add", {"text": "buy milk"})``."""
        return await self._request(cmd, args, timeout)

    async def _request(self, cmd: str, args: Optional[Mapping[str, Any]], timeout: Optional[float]) -> Dict[str, Any]:
        if self._task is None:
            raise ConnectionClosed("the client is not connected: await it or use async with")
        if self._resuming is not None:
            await asyncio.shield(self._resuming)
        if self._failure is not None:
            raise self._protocol_error()
        if self.closed or self._writer is None:
            raise ConnectionClosed("the client is closed", self.bye, self._ended and self.bye is not None)
        line = request.encode(self._next_id + 1, cmd, args)
        request.check_length(line, self._line_limit)
        self._next_id += 1
        request_id = self._next_id
        future: "asyncio.Future[Message]" = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        self._nudge()  # the reader reads on to the reply, whatever is full
        self._lines[request_id] = line
        try:
            self._writer.write(line)
            reply = await asyncio.wait_for(future, self._timeout if timeout is None else timeout)
        except asyncio.TimeoutError:
            raise Timeout(f"the reply to {cmd.split(' ', 1)[0]}") from None
        except (OSError, ssl.SSLError):
            raise ConnectionClosed() from None
        finally:
            self._pending.pop(request_id, None)
            self._lines.pop(request_id, None)
        result = request.result_of(reply)
        self.token = request.new_token(cmd, args, result) or self.token
        return result

    async def confirm(self, fields: Optional[Mapping[str, str]] = None, *, alert: Optional[str] = None,
                      timeout: Optional[float] = None) -> Dict[str, Any]:
        """Answer the presented alert (or ``alert``) with its confirm action and ``fields``."""
        return await self._request("confirm", request.confirm_args(self.state, fields, alert), timeout)

    async def cancel(self, *, alert: Optional[str] = None, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Answer the presented alert (or ``alert``) with its cancel action."""
        return await self._request("cancel", {"alert": alert or request.presented_alert_id(self.state)}, timeout)

    async def end_others(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """End every other connection to this session (they get ``bye`` ``revoked``)
        and give it a new token, kept here for resuming: a token or link someone else
        holds no longer joins it. Returns ``{ended, token}``."""
        return await self._request("end-others", {}, timeout)

    async def attach(self, token: str, last_rev: Optional[int] = None, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """Move this connection to the session that owns ``token``; with ``last_rev``
        every event after it arrives again, otherwise a snapshot (``views``, ``alert``
        and ``rev`` start over). Raises ``ViewlineError`` (``bad_token``) for a token
        that is not a live session's; follows ``moved``."""
        args: Dict[str, Any] = {"token": token}
        if last_rev is not None:
            args["lastRev"] = last_rev
        for _ in range(3):
            try:
                result = await self._request("attach", args, timeout)
            except MovedError as error:
                if error.address is None:
                    raise
                await self._hand_over(error.address)  # the session lives on another node: go there
                continue
            self.token = token
            self.session = result["session"]
            return result
        raise ViewlineError("moved", "the session kept moving between nodes")

    async def _hand_over(self, address: Address) -> None:
        """Move to a connection to ``address``; the pump goes on reading from it."""
        reader, writer = await self._open(address)
        try:
            welcome = await asyncio.wait_for(self._read(reader), self._connect_timeout)
        except asyncio.TimeoutError:
            welcome = None
        except ProtocolError as error:
            writer.close()
            raise ConnectError(f"the node the session moved to broke the protocol: {error.message}") from error
        if welcome is None or welcome.get("type") != "welcome":
            writer.close()
            raise ConnectError("the node the session moved to refused the connection")
        old = self._writer
        self._reader, self._writer, self._address = reader, writer, address
        self._line_limit = request.line_limit(welcome)  # each node says its own
        if old is not None:
            old.close()

    async def help(self, *, timeout: Optional[float] = None) -> Help:
        """The server's declarations (``help``), as ``Client.help``."""
        return cast(Help, await self._request("help", {}, timeout))

    async def settle(self, timeout_ms: int = 10000) -> None:
        """Wait until the session runs no background work (the ``wait`` command)."""
        await self._request("wait", {"timeout": timeout_ms}, timeout_ms / 1000 + 5)

    async def events(self) -> AsyncIterator[Message]:
        """Every event, in order, until the connection closes for good (``ProtocolError``
        if the client closed it because the server broke the protocol).

        Each call is its own reader with its own queue of at most ``max_queued_events``:
        it starts with the events no one has taken yet, then gets every event that
        arrives. While it is full the client stops reading (see the class's note);
        leave the loop (``break``) or close it to let the client go on without it.
        ``wait_for`` reads apart."""
        assert self._stream is not None, "not connected"
        stream = self._new_stream(self._stream.take_all())
        if self.closed:
            stream.close(self._failure)
        self._subscribers.add(stream)
        self._nudge()
        try:
            while True:
                try:
                    event = await stream.get()
                except ProtocolError:
                    raise
                except ConnectionClosed:
                    return
                yield event
        finally:
            self._subscribers.discard(stream)
            self._nudge()

    async def wait_for(self, predicate: Callable[[Message], bool], *, timeout: Optional[float] = None,
                       what: str = "event") -> Message:
        """The next event matching ``predicate`` (earlier, non-matching events are
        dropped). Raises ``Timeout``, or ``ConnectionClosed`` once the connection is
        closed for good; an exception from ``predicate`` propagates. A wait that ends
        without a match takes nothing: the events it went past stay queued."""
        stream = self._stream
        if stream is None:
            raise ConnectionClosed("the client is not connected")
        passed: List[Message] = []

        async def find() -> Message:
            try:
                while True:
                    event = await stream.get()
                    if predicate(event):
                        return event
                    passed.append(event)
            except BaseException:
                stream.put_back(passed)
                raise
        self._waiting += 1  # the reader reads on while someone waits
        self._nudge()
        try:
            return await asyncio.wait_for(find(), self._timeout if timeout is None else timeout)
        except asyncio.TimeoutError:
            raise Timeout(what) from None
        finally:
            self._waiting -= 1

    async def wait_for_display(self, view: str, predicate: Optional[Callable[[Dict[str, Any]], bool]] = None, *,
                               timeout: Optional[float] = None) -> Dict[str, Any]:
        """The state of ``view`` once it matches: at once when its latest state does
        (``views``; the queued events up to its last display are taken); else the first
        matching display queued, else the next to arrive."""
        state = self.state.views.get(view)
        if state is not None and (predicate is None or predicate(state)) and self._stream is not None:
            self._stream.take_through_last(lambda m: m.get("type") == "display" and m.get("view") == view)
            return state
        event = await self.wait_for(
            lambda m: m.get("type") == "display" and m["view"] == view and (predicate is None or predicate(m["state"])),
            timeout=timeout, what=f"a display of {view}")
        return cast("Dict[str, Any]", event["state"])

    async def wait_for_alert(self, *, timeout: Optional[float] = None) -> Message:
        """The alert to answer: the presented one at once (``alert``), even if an
        earlier wait went past its event; else the next to arrive. An alert received
        that is no longer presented (answered elsewhere, dismissed) is not returned."""
        presented = self.state.alert
        if presented is not None and self._stream is not None:
            self._stream.take_through_last(lambda m: m.get("type") == "alert" and m.get("id") == presented.get("id"))
            return presented
        return await self.wait_for(lambda m: m.get("type") == "alert" and self.state.alert is not None
                                   and self.state.alert.get("id") == m.get("id"), timeout=timeout, what="an alert")

    # -- reading --------------------------------------------------------------
    async def _read(self, reader: _LineReader) -> Optional[Message]:
        """The next message from ``reader``; None at the end of the connection;
        ``ProtocolError`` for a line too long or a message the client cannot act on."""
        while True:
            try:
                line = await reader.readline()
            except (OSError, ssl.SSLError):
                return None
            if line is None:
                return None
            self._heard = asyncio.get_running_loop().time()
            message = wire.parse(line)
            if message is None:
                log.warning("viewline: ignored a line from the server that is not a JSON object: %r", line[:200])
                continue
            wire.check(message)
            if message.get("type") == "bye":
                self.bye = message
                if bye_is_final(message):
                    self._ended = True
                elif self._reconnect and self._resuming is None and self._task is not None:
                    # The server closes this connection next: commands from now on
                    # wait for the resumed one instead of going out on this one.
                    self._resuming = asyncio.get_running_loop().create_future()
            self.state.observe(message)
            if self._on_message:
                try:
                    self._on_message(message)
                except Exception:  # a callback's bug must not stop the client
                    log.exception("viewline: on_message raised")
            return message

    def _deliver(self, message: Message) -> None:
        if message.get("type") == "reply":
            future = self._pending.get(message.get("re"))
            if future is not None and not future.done():
                future.set_result(message)
            return
        if self._stream is not None:
            self._stream.put(message)
        for stream in self._subscribers:
            stream.put(message)

    async def _pump(self) -> None:
        try:
            while True:
                await self._backpressure()
                reader = self._reader
                assert reader is not None
                message = await self._read(reader)
                if message is None and reader is not self._reader:
                    continue  # the old connection, closed by `attach` after following `moved`
                if message is None:
                    if not self._reconnect or self._ended or not await self._resume():
                        break
                    continue
                self._deliver(message)
        except ProtocolError as error:
            self._ended = True  # the server broke the protocol: closed for good, never resumed
            self._fail(error)
            if self._writer is not None:
                self._writer.transport.abort()
        finally:
            self._finish()

    async def _backpressure(self) -> None:
        """Waits while a full queue holds the reader back (``_must_pause``)."""
        assert self._wake is not None
        while self._must_pause():
            self._paused = True
            self._wake.clear()
            await self._wake.wait()
        if self._paused:
            self._paused = False
            self._heard = asyncio.get_running_loop().time()  # not quiet: it was us not reading

    def _finish(self) -> None:
        self.closed = True
        if self._resuming is not None and not self._resuming.done():
            self._resuming.set_result(None)  # commands waiting for a resume see the close
        if self._pinger:
            self._pinger.cancel()
        ended = self._ended and self.bye is not None
        for future in self._pending.values():
            if not future.done():
                future.set_exception(self._protocol_error() if self._failure is not None
                                     else ConnectionClosed(bye=self.bye, session_ended=ended))
        self._pending.clear()
        if self._stream is not None:
            self._stream.close(self._failure)
        for stream in self._subscribers:
            stream.close(self._failure)

    async def _ping_when_quiet(self) -> None:
        """After ``ping_interval`` of silence, a ``ping``; no reply in time cuts the
        connection, which the pump resumes (or ends)."""
        loop = asyncio.get_running_loop()
        while not self.closed:
            quiet = loop.time() - self._heard
            if self._paused:  # not quiet: the client is not reading (backpressure)
                await asyncio.sleep(self._ping_interval)
                continue
            if quiet < self._ping_interval:
                await asyncio.sleep(self._ping_interval - quiet)
                continue
            try:
                await self._request("ping", {}, self._timeout)
            except (Timeout, ConnectionClosed):
                if self.closed:
                    return
                log.warning("viewline: no answer to a keepalive ping; reconnecting")
                self.drop()
                await asyncio.sleep(self._ping_interval)

    async def _attach_at(self, target: Address, hops: int = 0) -> str:
        """Connect to ``target`` and attach this session: ``attached``, ``retry`` (no
        answer, or a node that cannot take it yet) or ``gone`` (the session ended)."""
        try:
            reader, writer = await self._open(target)
        except ConnectError:
            return "retry"
        old = self._writer
        self._reader, self._writer = reader, writer
        if old is not None:
            old.close()
        try:
            welcome = await asyncio.wait_for(self._read(reader), self._connect_timeout)  # a fresh session's
            if welcome is None or welcome.get("type") != "welcome":
                return "retry"
            writer.write(request.encode("_resume", "attach", {"token": self.token, "lastRev": self.state.rev}))
            reply = await asyncio.wait_for(self._read(reader), self._connect_timeout)
        except asyncio.TimeoutError:
            writer.close()
            return "retry"
        if reply is None:
            return "retry"
        if reply.get("ok"):
            self._address = target
            self._line_limit = request.line_limit(welcome)  # each node says its own
            return "attached"
        error = error_from_reply(reply)
        if isinstance(error, MovedError) and error.address is not None and hops < 3:
            return await self._attach_at(error.address, hops + 1)
        return "retry" if error.code in request.RETRYABLE_ATTACH else "gone"

    async def _resume(self) -> bool:
        """Reconnect with backoff and attach to this session from the last rev seen."""
        resuming = self._resuming or asyncio.get_running_loop().create_future()
        self._resuming = resuming
        # A server answers every command it began before it says bye (PROTOCOL §4): after
        # a bye, the commands still pending never ran and are sent again once resumed.
        # Replies lost with a connection that dropped without one: those commands may
        # or may not have run.
        if self.bye is None:
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(ConnectionClosed("the connection dropped before the reply; the command may or may not have run"))
            self._pending.clear()
        candidates = [self._address] + [node for node in self._nodes if node != self._address]
        try:
            for attempt in range(self._reconnect_attempts * len(candidates)):
                if self._ended and self.bye is None:
                    return False  # closed by us meanwhile
                outcome = await self._attach_at(candidates[attempt % len(candidates)])
                if outcome == "attached":
                    self.resumed += 1
                    self.bye = None
                    assert self._writer is not None
                    for request_id, future in list(self._pending.items()):  # in the order they were sent
                        if not future.done() and request_id in self._lines:
                            self._writer.write(self._lines[request_id])
                    return True
                if outcome == "gone":
                    self._ended = True
                    return False
                if attempt % len(candidates) == len(candidates) - 1:
                    await asyncio.sleep(self._backoff(attempt // len(candidates)))
            self._ended = True
            return False
        finally:
            self._resuming = None
            if not resuming.done():
                resuming.set_result(None)
