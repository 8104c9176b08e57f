"""An asyncio client for the Viewline protocol."""
from __future__ import annotations

import asyncio
import ssl
import json
from typing import Any, AsyncIterator, Callable, Dict, Optional, cast

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

    @classmethod
    async def connect(cls, host: str = "127.0.0.1", port: int = 7878,
                      on_message: Optional[Callable[[Message], None]] = None,
                      tls: bool = False, ca_file: Optional[str] = None) -> "AsyncClient":
        """Connect and read the welcome; ``tls``/``ca_file`` as for ``Client.connect``."""
        context = ssl.create_default_context(cafile=ca_file) if tls or ca_file else None
        reader, writer = await asyncio.open_connection(host, port, limit=1 << 22, ssl=context)
        client = cls(reader, writer, on_message)
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
        result = await self._request("attach", args, 10)
        self.token = token
        self.session = result["session"]
        return result

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
        self.state.observe(message)
        if self._on_message:
            self._on_message(message)
        return cast("Optional[Message]", message)

    async def _pump(self) -> None:
        try:
            while True:
                message = await self._read()
                if message is None:
                    break
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
