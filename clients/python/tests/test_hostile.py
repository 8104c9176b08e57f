"""A hostile server: the client holds no more of what it sends than its limits allow,
stops reading rather than queueing without end, raises only its own errors whatever
numbers come, and never hands a terminal a control character. Every test runs
against the scripted server in fake_server.py (no real server needed)."""
from __future__ import annotations

import asyncio
import json
import logging
import time
import tracemalloc
from typing import Callable, Iterator, List

import pytest

from fake_server import FakeServer, Peer
from viewline import (AsyncClient, Client, ConnectError, MovedError, ProtocolError, ThrottledError, ViewlineError,
                      printable)
from viewline.wire import MAX_LINE_BYTES, MAX_QUEUED_EVENTS

MiB = 1 << 20


def run(coro):
    return asyncio.run(coro)


@pytest.fixture
def fake():
    servers = []

    def make(script):
        server = FakeServer(script)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.stop()


def rest_of(peer: Peer) -> None:
    """Answers every further command with an ok reply."""
    while (message := peer.receive()) is not None:
        peer.reply(message, {"pong": True})


def after_first_command(*lines) -> Callable[[Peer], None]:
    """A script: welcome, then for the first command the hostile ``lines``, then its reply."""
    def script(peer: Peer) -> None:
        peer.welcome()
        message = peer.receive()
        for line in lines:
            peer.send(line)
        if message is not None:
            peer.reply(message, {"pong": True})
        rest_of(peer)
    return script


def events(start: int = 1, per_chunk: int = 64) -> Iterator[bytes]:
    """Display events from rev ``start`` on, ``per_chunk`` whole lines at a time;
    ``events.last`` is the rev of the last line handed out."""
    rev = start
    while True:
        lines = []
        for _ in range(per_chunk):
            lines.append(json.dumps({"type": "display", "rev": rev, "view": "ticker", "state": {"n": rev}}))
            rev += 1
        events.last = rev - 1
        yield ("\n".join(lines) + "\n").encode()


def padded_display(size: int) -> bytes:
    """A display line of exactly ``size`` bytes (without its line ending)."""
    line = json.dumps({"type": "display", "rev": 1, "view": "pad", "state": {"p": ""}})
    return line.replace('"p": ""', '"p": "' + "x" * (size - len(line)) + '"').encode()


# -- an endless line ------------------------------------------------------------

def endless_line_after_first_command(peer: Peer) -> None:
    peer.welcome()
    if peer.receive() is not None:
        peer.server.streamed = peer.stream(b"x" * 65536, 16 * MiB)  # never a "\n"


def test_an_endless_line_is_refused_within_the_limit_and_never_resumed(fake):
    server = fake(endless_line_after_first_command)
    with Client.connect(port=server.port, reconnect=True) as vl:
        tracemalloc.start()
        try:
            with pytest.raises(ProtocolError) as caught:
                vl.command("ping")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert caught.value.code == "message_too_long" and str(MAX_LINE_BYTES) in caught.value.message
        assert peak < MAX_LINE_BYTES + 1 * MiB, f"held {peak} bytes of a line the limit says are {MAX_LINE_BYTES}"
        assert vl.closed
        with pytest.raises(ProtocolError):  # closed for good: no resume, every call says why
            vl.command("ping")
        with pytest.raises(ProtocolError):
            list(vl.events(timeout=0.1))
    for _ in range(50):
        if hasattr(server, "streamed"):
            break
        time.sleep(0.1)
    assert server.streamed < 16 * MiB  # the client hung up rather than read it all
    assert server.connections == 1


def test_the_asyncio_client_refuses_an_endless_line_within_the_limit(fake):
    server = fake(endless_line_after_first_command)

    async def scenario():
        async with AsyncClient.connect(port=server.port, reconnect=True) as vl:
            tracemalloc.start()
            try:
                with pytest.raises(ProtocolError) as caught:
                    await vl.command("ping")
                peak = tracemalloc.get_traced_memory()[1]
            finally:
                tracemalloc.stop()
            assert caught.value.code == "message_too_long"
            # The socket's own buffer (twice 64 KiB) and one read (256 KiB) come on
            # top of the line's limit, whatever the server sends.
            assert peak < MAX_LINE_BYTES + 2 * MiB, f"held {peak} bytes"
            with pytest.raises(ProtocolError):
                await vl.command("ping")
            with pytest.raises(ProtocolError):
                await vl.wait_for_alert(timeout=1)
            with pytest.raises(ProtocolError):
                async for _ in vl.events():
                    pass
            assert vl.closed
    run(scenario())
    assert server.connections == 1


@pytest.mark.parametrize("ending", [b"\n", b"\r\n"], ids=["LF", "CRLF"])
def test_a_line_of_the_limit_is_taken_and_one_byte_more_is_not(fake, ending):
    limit = 2000
    server = fake(after_first_command(padded_display(limit) + ending.rstrip(b"\n"),
                                      padded_display(limit + 1) + ending.rstrip(b"\n")))
    with Client.connect(port=server.port, max_line_bytes=limit) as vl:
        with pytest.raises(ProtocolError) as caught:
            vl.command("ping")
        assert caught.value.code == "message_too_long"
        assert vl.views["pad"]["p"].startswith("x")  # the line of exactly the limit went through

    async def scenario():
        async with AsyncClient.connect(port=server.port, max_line_bytes=limit) as vl:
            with pytest.raises(ProtocolError):
                await vl.command("ping")
            assert "pad" in vl.views
    run(scenario())


def test_an_overlong_welcome_is_a_connect_error(fake):
    def script(peer: Peer) -> None:
        peer.send(padded_display(5000))
        time.sleep(1)

    server = fake(script)
    with pytest.raises(ConnectError) as caught:
        Client.connect(port=server.port, max_line_bytes=1024)
    assert isinstance(caught.value.__cause__, ProtocolError)
    with pytest.raises(ConnectError) as caught:
        run(AsyncClient.connect(port=server.port, max_line_bytes=1024)._start())
    assert caught.value.__cause__.code == "message_too_long"


def test_limits_must_be_positive():
    with pytest.raises(ValueError):
        Client(port=1, max_line_bytes=0)
    with pytest.raises(ValueError):
        AsyncClient(port=1, max_queued_events=-1)


# -- a flood of events --------------------------------------------------------

def flood_then_answer(peer: Peer) -> None:
    """Welcome, then events until the client stops reading; then, for the command
    that comes, the rest of the chunk begun and the reply."""
    peer.welcome()
    chunks = events()
    stopped, rest, sent = peer.flood(chunks, 16 * MiB)
    peer.server.flood = (stopped, sent, events.last)
    message = peer.receive()
    if message is not None:
        peer.sock.sendall(rest)
        peer.reply(message, {"pong": True})
    rest_of(peer)


def wait_for_flood(server: FakeServer) -> tuple:
    for _ in range(100):
        if hasattr(server, "flood"):
            return server.flood
        time.sleep(0.05)
    raise AssertionError("the flood never ended")


def test_a_blocking_client_that_is_not_read_holds_the_server_back(fake):
    server = fake(flood_then_answer)
    cap = 16
    with Client.connect(port=server.port, max_queued_events=cap) as vl:
        stopped, sent, last = wait_for_flood(server)
        assert stopped and sent < 16 * MiB  # nothing was read between calls
        assert vl.queued_events == 0 and vl.rev == 0
        # A command reads on to its reply through the flood: the queue keeps the newest.
        assert vl.command("ping") == {"pong": True}
        assert vl.queued_events == cap and vl.dropped_events == last - cap
        assert vl.rev == last
        assert [vl.next_event()["rev"] for _ in range(cap)] == list(range(last - cap + 1, last + 1))


def test_an_asyncio_client_stops_reading_at_a_full_queue_and_a_command_still_gets_its_reply(fake):
    server = fake(flood_then_answer)
    cap = 16

    async def scenario():
        async with AsyncClient.connect(port=server.port, max_queued_events=cap) as vl:
            for _ in range(100):
                if hasattr(server, "flood"):
                    break
                await asyncio.sleep(0.05)
            stopped, sent, last = server.flood
            assert stopped and sent < 16 * MiB
            # It read exactly what fills the queue, then stopped: nothing dropped.
            assert vl.queued_events == cap and vl.rev == cap and vl.dropped_events == 0
            await asyncio.sleep(0.2)
            assert vl.rev == cap
            assert await vl.command("ping", timeout=10) == {"pong": True}
            assert vl.queued_events <= cap
            assert vl.rev == last and vl.dropped_events == last - cap
            newest = [(await vl.wait_for(lambda e: True))["rev"] for _ in range(cap)]
            assert newest == list(range(last - cap + 1, last + 1))
    run(scenario())


def test_the_default_queue_is_bounded_too(fake):
    server = fake(flood_then_answer)

    async def scenario():
        async with AsyncClient.connect(port=server.port) as vl:
            for _ in range(100):
                if hasattr(server, "flood"):
                    break
                await asyncio.sleep(0.05)
            assert server.flood[0]
            assert vl.queued_events == MAX_QUEUED_EVENTS == vl.rev
    run(scenario())


def test_a_slow_events_loop_loses_nothing(fake):
    total = 3000

    def script(peer: Peer) -> None:
        peer.welcome()
        for chunk in events(per_chunk=100):
            peer.sock.sendall(chunk)
            if events.last >= total:
                break
        rest_of(peer)

    server = fake(script)

    async def scenario():
        async with AsyncClient.connect(port=server.port, max_queued_events=8) as vl:
            seen: List[int] = []
            most = 0
            async for event in vl.events():
                seen.append(event["rev"])
                most = max(most, vl.queued_events)
                if len(seen) % 500 == 0:
                    await asyncio.sleep(0.05)  # a slow reader: the client waits for it
                if event["rev"] == total:
                    break
            assert seen == list(range(1, total + 1))
            assert most <= 8 and vl.dropped_events == 0
    run(scenario())


def test_an_on_message_callback_sees_every_event_and_the_queue_keeps_the_newest(fake):
    total = 2000

    def script(peer: Peer) -> None:
        peer.welcome()
        for chunk in events(per_chunk=100):
            peer.sock.sendall(chunk)
            if events.last >= total:
                break
        rest_of(peer)

    server = fake(script)
    seen: List[int] = []

    async def scenario():
        async with AsyncClient.connect(port=server.port, max_queued_events=8,
                                       on_message=lambda m: seen.append(m.get("rev", 0))) as vl:
            for _ in range(100):
                if vl.rev == total:
                    break
                await asyncio.sleep(0.05)
            assert vl.rev == total and seen[-1] == total
            assert vl.queued_events == 8
    run(scenario())


# -- hostile numbers and shapes ---------------------------------------------------

BAD_MESSAGES = {
    "rev 1e300": '{"type":"display","rev":1e300,"view":"v","state":{}}',
    "rev 1e19": '{"type":"display","rev":1e19,"view":"v","state":{}}',
    "rev 2**64 as an integer": '{"type":"display","rev":18446744073709551616,"view":"v","state":{}}',
    "rev 2**53": '{"type":"display","rev":9007199254740992,"view":"v","state":{}}',
    "rev of 5000 digits": '{"type":"display","rev":' + "9" * 5000 + ',"view":"v","state":{}}',
    "rev 1e400 (inf)": '{"type":"alert","rev":1e400,"id":"a1","title":"","message":"","actions":[]}',
    "rev -1": '{"type":"dismiss","rev":-1,"id":"a1"}',
    "rev 1.5": '{"type":"display","rev":1.5,"view":"v","state":{}}',
    "rev a string": '{"type":"display","rev":"7","view":"v","state":{}}',
    "rev true": '{"type":"display","rev":true,"view":"v","state":{}}',
    "alert id a number": '{"type":"alert","rev":1,"id":1e300,"title":"","message":"","actions":[]}',
    "dismiss id a number": '{"type":"dismiss","rev":1,"id":5}',
    "display view a number": '{"type":"display","rev":1,"view":12,"state":{}}',
    "display state a list": '{"type":"display","rev":1,"view":"v","state":[1]}',
    "reply re an object": '{"type":"reply","re":{"a":1},"ok":true,"result":{}}',
    "reply re true": '{"type":"reply","re":true,"ok":true,"result":{}}',
    "reply ok a number": '{"type":"reply","re":null,"ok":1,"result":{}}',
    "reply result a list": '{"type":"reply","re":null,"ok":true,"result":[1]}',
    "reply error a string": '{"type":"reply","re":null,"ok":false,"error":"x"}',
    "attach rev 1e300": '{"type":"reply","re":null,"ok":true,"result":{"session":"s","rev":1e300,"replayed":0,"snapshot":true}}',
    "attach rev -3": '{"type":"reply","re":null,"ok":true,"result":{"session":"s","rev":-3,"replayed":0,"snapshot":true}}',
    "bye reason a list": '{"type":"bye","reason":[1]}',
    "bye code a number": '{"type":"bye","reason":"x","code":5}',
}


@pytest.mark.parametrize("line", BAD_MESSAGES.values(), ids=BAD_MESSAGES.keys())
def test_a_hostile_message_is_a_protocol_error_and_nothing_else(fake, line):
    server = fake(after_first_command(line))
    with Client.connect(port=server.port, reconnect=True) as vl:
        with pytest.raises(ProtocolError) as caught:
            vl.command("ping")
        assert caught.value.code == "bad_message" and vl.closed
        assert vl.rev <= 1 and "v" not in vl.views

    async def scenario():
        async with AsyncClient.connect(port=server.port, reconnect=True) as vl:
            with pytest.raises(ProtocolError) as caught:
                await vl.command("ping")
            assert caught.value.code == "bad_message"
            with pytest.raises(ProtocolError):
                await vl.command("ping")
    run(scenario())
    assert server.connections == 2  # neither client resumed


def test_a_welcome_without_a_session_is_a_connect_error(fake):
    server = fake(lambda peer: (peer.send('{"type":"welcome","protocol":1,"session":5,"token":"t"}'), time.sleep(1)))
    with pytest.raises(ConnectError) as caught:
        Client.connect(port=server.port)
    assert caught.value.__cause__.code == "bad_message"
    with pytest.raises(ConnectError):
        run(AsyncClient.connect(port=server.port)._start())


TAKEN = {
    "rev 3.0 is 3": ('{"type":"display","rev":3.0,"view":"v","state":{}}', lambda vl: vl.rev == 3),
    "rev 2**53 - 1": ('{"type":"display","rev":9007199254740991,"view":"v","state":{}}',
                      lambda vl: vl.rev == 2**53 - 1),
    "a huge number in a state is the state's": (
        '{"type":"display","rev":1,"view":"v","state":{"n":' + "9" * 5000 + ',"m":1e400,"r":-1.5}}',
        lambda vl: vl.views["v"]["n"] == float("inf") and vl.views["v"]["r"] == -1.5),
    "NaN is not JSON: skipped": ('{"type":"display","rev":NaN,"view":"v","state":{}}', lambda vl: vl.rev == 0),
    "Infinity is not JSON: skipped": ('{"type":"display","rev":1,"view":"v","state":{"x":Infinity}}',
                                      lambda vl: "v" not in vl.views),
    "nested too deep for Python: skipped": ("[" * 20_000 + "]" * 20_000, lambda vl: vl.rev == 0),
    "an unknown type with odd keys": ('{"type":"telepathy","id":1e300,"view":[],"ok":"no"}', lambda vl: vl.rev == 0),
}


@pytest.mark.parametrize("line,check", TAKEN.values(), ids=TAKEN.keys())
def test_numbers_the_client_does_not_act_on_pass_and_lines_that_are_not_json_are_skipped(fake, line, check):
    server = fake(after_first_command(line))
    with Client.connect(port=server.port) as vl:
        assert vl.command("ping") == {"pong": True}
        assert check(vl)

    async def scenario():
        async with AsyncClient.connect(port=server.port) as vl:
            assert await vl.command("ping") == {"pong": True}
            assert check(vl)
    run(scenario())


RETRY_AFTER = {"1e300": None, "-5": None, "1.5": None, "true": None, "100000000000000000000": None,
               "86401": None, '"30"': None, "30": 30, "0": 0, "86400": 86400}


@pytest.mark.parametrize("value,expected", RETRY_AFTER.items(), ids=RETRY_AFTER.keys())
def test_retry_after_is_a_sane_number_of_seconds_or_none(fake, value, expected):
    def script(peer: Peer) -> None:
        peer.welcome()
        message = peer.receive()
        peer.send('{"type":"reply","re":%d,"ok":false,"error":{"code":"login_throttled","message":"wait",'
                  '"retryAfter":%s}}' % (message["id"], value))
        rest_of(peer)

    server = fake(script)
    with Client.connect(port=server.port) as vl:
        with pytest.raises(ThrottledError) as caught:
            vl.command("login alice x")
        assert caught.value.retry_after == expected


@pytest.mark.parametrize("address", ["h:99999999999999999999", "h:\u00b2", "h:-1", "h:0", "h:65536", "h:",
                                     "\u0000bad:7878", "a b:7878", "h:1e3", "h: 80"])
def test_a_moved_address_that_is_not_one_is_none(fake, address):
    def script(peer: Peer) -> None:
        peer.welcome()
        message = peer.receive()
        peer.reply(message, error={"code": "moved", "message": "go", "address": address})
        rest_of(peer)

    server = fake(script)
    with Client.connect(port=server.port) as vl:
        with pytest.raises(MovedError) as caught:
            vl.attach("t" * 48)
        assert caught.value.address is None

    async def scenario():
        async with AsyncClient.connect(port=server.port) as vl:
            with pytest.raises(MovedError) as caught:
                await vl.attach("t" * 48)
            assert caught.value.address is None
    run(scenario())


def test_a_moved_address_that_cannot_be_reached_is_a_connect_error(fake):
    def script(peer: Peer) -> None:
        peer.welcome()
        message = peer.receive()
        peer.reply(message, error={"code": "moved", "message": "go", "address": "x" * 70 + ".example:7878"})
        rest_of(peer)

    server = fake(script)
    with Client.connect(port=server.port) as vl:
        with pytest.raises(ConnectError):  # an IDNA label longer than 63: Python's ValueError, caught
            vl.attach("t" * 48)

    async def scenario():
        async with AsyncClient.connect(port=server.port) as vl:
            with pytest.raises(ConnectError):
                await vl.attach("t" * 48)
    run(scenario())


# -- control characters -----------------------------------------------------------

HOSTILE_TEXT = "\x1b]0;pwned\x07\x1b[2J\x9b31mred\r\u0085over\x00\x7f"


def test_printable_strips_c0_and_c1_controls_but_keeps_newline_and_tab():
    assert printable(HOSTILE_TEXT) == "]0;pwned[2J31mredover"
    assert printable("line one\n\tline two — ünïcode") == "line one\n\tline two — ünïcode"


def test_errors_from_the_server_are_printable(fake):
    def script(peer: Peer) -> None:
        peer.welcome()
        message = peer.receive()
        peer.reply(message, error={"code": "bad\x1b[2J_code", "message": HOSTILE_TEXT})
        rest_of(peer)

    server = fake(script)
    with Client.connect(port=server.port) as vl:
        with pytest.raises(ViewlineError) as caught:
            vl.command("ping")
    error = caught.value
    for text in (error.code, error.message, str(error)):
        assert printable(text) == text
    assert error.reply["error"]["message"] == HOSTILE_TEXT  # the reply itself is as it came


def test_a_refusal_and_a_logged_line_are_printable(fake, caplog):
    server = fake(lambda peer: peer.send({"type": "bye", "reason": HOSTILE_TEXT, "code": "refused"}))
    with pytest.raises(ConnectError) as caught:
        Client.connect(port=server.port)
    assert printable(str(caught.value)) == str(caught.value)

    other = fake(after_first_command(b"\x1b[2J not json \x9b"))
    with caplog.at_level(logging.WARNING, logger="viewline"):
        with Client.connect(port=other.port) as vl:
            vl.command("ping")
    logged = [record.getMessage() for record in caplog.records]
    assert logged and all(printable(text) == text for text in logged)
