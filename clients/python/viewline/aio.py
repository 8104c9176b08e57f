"""An asyncio client for the Viewline protocol."""
from __future__ import annotations

import asyncio
import ssl
import json
from typing import Any, AsyncIterator, Callable, Dict, List, Optional, Sequence, Tuple, cast

from .errors import ConnectionClosed, Timeout, ViewlineError
from . import request
from .state import SessionState

Message = Dict[str, Any]


class AsyncClient:
    """The asyncio twin of ``Client``: a reader task routes replies to their
    command by id and queues events for ``events()`` and ``wait_for``.

    >>> vl = await AsyncClient.connect(port=7878)
    >>> await vl.command("search thai food")
    >>> async for event in vl.events(): ...
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 on_message: Optional[Callable[[Message], None]] = None) -> None:
        self._reader = reader
        self._writer = writer
        self._on_message = on_message
        self._pending: Dict[Any, "asyncio.Future[Message]"] = {}
        self._events: "asyncio.Queue[Optional[Message]]" = asyncio.Queue()
        self._next_id = 0
        self.state = SessionState()
        self.closed = False
        self.welcome: Message = {}
        self.session = ""
        self.token = ""
        self._task: Optional["asyncio.Task[None]"] = None
        self._address: Optional[Tuple[str, int]] = None
        self._tls: Optional[ssl.SSLContext] = None
        self._reconnect_attempts = 0
        self._ended = False  # closed by us, or the server said bye: never resume
        self._resuming: Optional["asyncio.Future[None]"] = None
        self._nodes: List[Tuple[str, int]] = []
        #: How many times the connection dropped and the session was resumed.
        self.resumed = 0

    @classmethod
    async def connect(cls, host: str = "127.0.0.1", port: int = 7878,
                      on_message: Optional[Callable[[Message], None]] = None,
                      tls: bool = False, ca_file: Optional[str] = None,
                      reconnect: bool = False, reconnect_attempts: int = 8,
                      nodes: Sequence[Tuple[str, int]] = ()) -> "AsyncClient":
        """Connect and read the welcome; ``tls``/``ca_file`` and ``reconnect`` as for
        ``Client.connect``: with ``reconnect=True`` a dropped connection is reopened
        and the session resumed from the last ``rev`` seen; commands whose replies
        were lost raise ``ConnectionClosed``. In a cluster, ``attach`` follows
        ``moved``, and a reconnect also tries the other ``nodes``."""
        context = ssl.create_default_context(cafile=ca_file) if tls or ca_file else None
        reader, writer = await asyncio.open_connection(host, port, limit=1 << 22, ssl=context)
        client = cls(reader, writer, on_message)
        client._tls = context
        client._nodes = [(host, port)] + [node for node in nodes if node != (host, port)]
        if reconnect:
            client._address = (host, port)
            client._reconnect_attempts = reconnect_attempts
        welcome = await client._read()
        if welcome is None or welcome.get("type") != "welcome":
            raise ViewlineError("bad_welcome", f"expected welcome, got {welcome}")
        client.welcome = welcome
        client.session = welcome["session"]
        client.token = welcome["token"]
        client._task = asyncio.ensure_future(client._pump())
        return client

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def close(self) -> None:
        self._ended = True
        if self.closed:
            return
        self.closed = True
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except OSError:
            pass
        if self._task:
            self._task.cancel()

    @property
    def views(self) -> Dict[str, Dict[str, Any]]:
        return self.state.views

    @property
    def alert(self) -> Optional[Message]:
        return self.state.alert

    async def command(self, cmd: str, timeout: float = 10, **args: Any) -> Dict[str, Any]:
        """Run a command (inline line, or name plus keyword args); returns its result."""
        name, args = request.resolve(cmd, args)
        return await self._request(name, args, timeout)

    async def _request(self, name: str, args: Dict[str, Any], timeout: float) -> Dict[str, Any]:
        if self._resuming is not None:
            await self._resuming
        if self.closed:
            raise ConnectionClosed()
        self._next_id += 1
        request_id = self._next_id
        future: "asyncio.Future[Message]" = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        self._writer.write(request.encode(request_id, name, args))
        await self._writer.drain()
        try:
            reply = await asyncio.wait_for(future, timeout)
        except asyncio.TimeoutError:
            raise Timeout(f"the reply to {name}") from None
        finally:
            self._pending.pop(request_id, None)
        return request.result_of(reply)

    async def confirm(self, alert: Optional[str] = None, **fields: str) -> Dict[str, Any]:
        args: Dict[str, Any] = {"alert": alert or request.presented_alert_id(self.state)}
        if fields:
            args["fields"] = fields
        return await self._request("confirm", args, 10)

    async def cancel(self, alert: Optional[str] = None) -> Dict[str, Any]:
        return await self._request("cancel", {"alert": alert or request.presented_alert_id(self.state)}, 10)

    async def attach(self, token: str, last_rev: Optional[int] = None) -> Dict[str, Any]:
        """Move this connection to the session that owns ``token``; with ``last_rev``
        every event after it arrives again, otherwise a snapshot. Raises
        ``ViewlineError`` (``bad_token``) for a token that is not a live session's."""
        args: Dict[str, Any] = {"token": token}
        if last_rev is not None:
            args["lastRev"] = last_rev
        for _ in range(3):
            try:
                result = await self._request("attach", args, 10)
            except ViewlineError as error:
                address = request.moved_address(error)
                if address is None:
                    raise
                await self._hand_over(address)  # the session lives on another node: go there
                continue
            self.token = token
            self.session = result["session"]
            return result
        raise ViewlineError("moved", "the session kept moving between nodes")

    async def _hand_over(self, address: Tuple[str, int]) -> None:
        """Move to a connection to ``address``; the pump goes on reading from it."""
        reader, writer = await asyncio.open_connection(address[0], address[1], limit=1 << 22, ssl=self._tls)
        welcome = await reader.readline()
        if json.loads(welcome or b"{}").get("type") != "welcome":
            writer.close()
            raise ConnectionClosed("the node the session moved to refused the connection")
        old = self._writer
        self._reader, self._writer = reader, writer
        if self._address is not None:
            self._address = address
        old.close()

    async def settle(self, timeout_ms: int = 10000) -> None:
        await self._request("wait", {"timeout": timeout_ms}, timeout_ms / 1000 + 5)

    async def events(self) -> AsyncIterator[Message]:
        """Every event, in order, until the connection closes."""
        while True:
            event = await self._events.get()
            if event is None:
                return
            yield event

    async def wait_for(self, predicate: Callable[[Message], bool], timeout: float = 10, what: str = "event") -> Message:
        """The next event matching ``predicate`` (earlier, non-matching events are dropped)."""
        async def find() -> Message:
            while True:
                event = await self._events.get()
                if event is None:
                    raise ConnectionClosed()
                if predicate(event):
                    return event
        try:
            return await asyncio.wait_for(find(), timeout)
        except asyncio.TimeoutError:
            raise Timeout(what) from None

    async def wait_for_display(self, view: str, predicate: Optional[Callable[[Dict[str, Any]], bool]] = None,
                               timeout: float = 10) -> Dict[str, Any]:
        event = await self.wait_for(
            lambda m: m.get("type") == "display" and m["view"] == view and (predicate is None or predicate(m["state"])),
            timeout, f"a display of {view}")
        return cast("Dict[str, Any]", event["state"])

    async def wait_for_alert(self, timeout: float = 10) -> Message:
        return await self.wait_for(lambda m: m.get("type") == "alert", timeout, "an alert")

    async def _read(self) -> Optional[Message]:
        line = await self._reader.readline()
        if not line:
            return None
        message = json.loads(line)
        if message.get("type") == "bye":
            self._ended = True
        self.state.observe(message)
        if self._on_message:
            self._on_message(message)
        return cast("Optional[Message]", message)

    async def _attach_at(self, target: Tuple[str, int], hops: int = 0) -> str:
        """Connect to ``target`` and attach this session: ``attached``, ``retry`` (no
        answer, or a node that cannot take it yet) or ``gone`` (the session ended)."""
        try:
            reader, writer = await asyncio.open_connection(target[0], target[1], limit=1 << 22, ssl=self._tls)
        except OSError:
            return "retry"
        self._reader, self._writer = reader, writer
        welcome = await self._read()  # a fresh session's, dropped by the attach
        if welcome is None or welcome.get("type") != "welcome":
            return "retry"
        writer.write(request.encode("_resume", "attach", {"token": self.token, "lastRev": self.state.rev}))
        await writer.drain()
        reply = await self._read()
        if reply is None:
            return "retry"
        if reply.get("ok"):
            self._address = target
            return "attached"
        error = ViewlineError(reply["error"]["code"], reply["error"]["message"], reply)
        moved = request.moved_address(error)
        if moved is not None and hops < 3:
            writer.close()
            return await self._attach_at(moved, hops + 1)
        return "retry" if error.code in request.RETRYABLE_ATTACH else "gone"

    async def _pump(self) -> None:
        try:
            while True:
                reading = self._reader
                try:
                    message = await self._read()
                except (ConnectionError, OSError):
                    message = None
                if message is None and reading is not self._reader:
                    continue  # the old connection, closed by `attach` after following `moved`
                if message is None:
                    if self._address is None or self._ended or not await self._resume():
                        break
                    continue
                if message.get("type") == "reply":
                    future = self._pending.get(message.get("re"))
                    if future is not None and not future.done():
                        future.set_result(message)
                else:
                    self._events.put_nowait(message)
        finally:
            self.closed = True
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(ConnectionClosed())
            self._events.put_nowait(None)

    async def _resume(self) -> bool:
        """Reconnect with backoff and attach to this session from the last rev seen."""
        address = self._address
        if address is None:
            return False
        resuming: "asyncio.Future[None]" = asyncio.get_running_loop().create_future()
        self._resuming = resuming
        # Replies lost with the old connection: those commands may or may not have run.
        for future in self._pending.values():
            if not future.done():
                future.set_exception(ConnectionClosed())
        self._pending.clear()
        candidates = [address] + [node for node in self._nodes if node != address]
        delay = 0.05
        try:
            for attempt in range(self._reconnect_attempts * len(candidates)):
                target = candidates[attempt % len(candidates)]
                outcome = await self._attach_at(target)
                if outcome == "attached":
                    self.resumed += 1
                    return True
                if outcome == "gone":
                    return False
                if attempt % len(candidates) == len(candidates) - 1:
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, 2.0)
            return False
        finally:
            self._resuming = None
            resuming.set_result(None)
