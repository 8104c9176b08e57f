"""A node's path to PostgreSQL: each node reaches the database through a TCP proxy
this run controls, on an asyncio loop of its own, so a fault can cut the link
(blackholed, then healed with what was open reset), slow it (every byte held a
while), or silence the connections open now for good while new ones work."""
from __future__ import annotations

import asyncio
from typing import Dict, List, Tuple


class Link:
    """A node's path to PostgreSQL: a TCP proxy that can be cut (blackholed: bytes
    are swallowed, new connections hang) and healed (what was open during the cut is
    reset, as a real partition's timeouts would)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, upstream: Tuple[str, int]):
        self.loop = loop
        self.upstream = upstream
        self.cut = False
        self.delay = 0.0                    # seconds each byte is held (a slow link)
        self.port = 0
        self.serial = 0
        self.pairs: Dict[int, List[asyncio.StreamWriter]] = {}   # serial → both ends
        self.tainted: set = set()                                # serials open during a cut
        self.silenced: set = set()                               # serials gone silent for good

    async def start(self) -> None:
        server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held = False
        while self.cut:                     # a SYN into the void: wait for the heal
            held = True
            await asyncio.sleep(0.05)
        if held:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        except OSError:
            writer.transport.abort()
            return
        self.serial += 1
        serial = self.serial
        self.pairs[serial] = [writer, up_writer]

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            # Bytes go on in order, each `delay` after it arrived (a slow link: a
            # statement sent in time runs late in PostgreSQL).
            queue: asyncio.Queue = asyncio.Queue()

            async def forward() -> None:
                while True:
                    due, data = await queue.get()
                    if data is None:
                        return
                    wait = due - self.loop.time()
                    if wait > 0:
                        await asyncio.sleep(wait)
                    dst.write(data)
                    await dst.drain()
            forwarder = asyncio.ensure_future(forward())
            try:
                while True:
                    data = await src.read(65536)
                    if not data:
                        break
                    if self.cut:
                        self.tainted.add(serial)
                        continue            # swallowed
                    if serial in self.silenced:
                        continue            # swallowed, and nobody is told
                    if serial in self.tainted:
                        break
                    queue.put_nowait((self.loop.time() + self.delay, data))
                queue.put_nowait((0.0, None))
                await forwarder
            except (OSError, ConnectionError):
                pass
            finally:
                forwarder.cancel()
                for end in self.pairs.get(serial, []):
                    end.transport.abort()
        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
        self.pairs.pop(serial, None)
        self.tainted.discard(serial)
        self.silenced.discard(serial)

    def upstream_ports(self) -> List[int]:
        """The local ports of this link's open connections to PostgreSQL: its
        backends' `client_port`s."""
        async def ports() -> List[int]:
            return [pair[1].get_extra_info("sockname")[1] for pair in self.pairs.values()]
        return asyncio.run_coroutine_threadsafe(ports(), self.loop).result()

    def silence(self) -> None:
        """Every connection open now goes silent for good (what either side sends is
        dropped, nothing is closed); new connections work: a NAT or firewall that
        forgot its flows. The node must notice by its own deadlines."""
        def apply() -> None:
            self.silenced.update(self.pairs)
        self.loop.call_soon_threadsafe(apply)

    def set_delay(self, seconds: float) -> None:
        def apply() -> None:
            self.delay = seconds
        self.loop.call_soon_threadsafe(apply)

    def set_cut(self, cut: bool) -> None:
        def apply() -> None:
            self.cut = cut
            if cut:
                self.tainted.update(self.pairs)
            else:
                for serial in list(self.tainted):
                    for end in self.pairs.get(serial, []):
                        end.transport.abort()
                self.tainted.clear()
        self.loop.call_soon_threadsafe(apply)
