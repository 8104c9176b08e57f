"""Time, lifecycle and errors: the client never hangs, never crashes on what the
server sends, resumes after a `bye` that leaves the session alive and stops after
one that ends it. Error paths against a scripted server; flows against a real one."""
from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from fake_server import FakeServer, Peer
from viewline import (AsyncClient, Client, ConnectError, ConnectionClosed, ThrottledError, Timeout, ViewlineError)


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


def silent(peer: Peer) -> None:
    time.sleep(5)


def welcome_then_silent(peer: Peer) -> None:
    peer.welcome()
    while peer.receive() is not None:
        pass


def echo_commands(peer: Peer) -> None:
    """Welcome, then an `ok` reply to every command, echoing what was sent."""
    peer.welcome()
    while (message := peer.receive()) is not None:
        peer.reply(message, {"sent": message})


# -- time ---------------------------------------------------------------------

def test_no_welcome_in_time_is_a_connect_error(fake):
    server = fake(silent)
    started = time.monotonic()
    with pytest.raises(ConnectError):
        Client.connect(port=server.port, connect_timeout=0.3)
    with pytest.raises(ConnectError):
        run(AsyncClient.connect(port=server.port, connect_timeout=0.3)._start())
    assert time.monotonic() - started < 3


def test_nothing_listening_is_a_connect_error(fake):
    server = fake(silent)
    port = server.port
    server.stop()
    with pytest.raises(ConnectError) as caught:
        Client.connect(port=port)
    assert caught.value.code == "connect_failed" and isinstance(caught.value.__cause__, OSError)

    async def scenario():
        with pytest.raises(ConnectError):
            async with AsyncClient.connect(port=port):
                pass
    run(scenario())


def test_a_silent_server_times_a_command_out_by_default_and_per_call(fake):
    server = fake(welcome_then_silent)
    with Client.connect(port=server.port, timeout=0.3) as vl:
        with pytest.raises(Timeout):
            vl.command("ping")
        started = time.monotonic()
        with pytest.raises(Timeout):
            vl.command("ping", timeout=0.1)
        assert time.monotonic() - started < 0.25

    async def scenario():
        async with AsyncClient.connect(port=server.port, timeout=0.3) as vl:
            with pytest.raises(Timeout):
                await vl.command("ping")
            with pytest.raises(Timeout):
                await vl.command("ping", timeout=0.1)
    run(scenario())


def test_client_options_never_collide_with_command_arguments(fake):
    server = fake(echo_commands)
    with Client.connect(port=server.port) as vl:
        sent = vl.command("wait", {"timeout": 500}, timeout=5)["sent"]
        assert sent == {"id": sent["id"], "cmd": "wait", "args": {"timeout": 500}}
        sent = vl.command("add buy milk")["sent"]
        assert sent == {"id": sent["id"], "line": "add buy milk"}  # parsed by the server


def test_the_health_check_resumes_a_half_open_connection(fake):
    def script(peer: Peer) -> None:
        if peer.number == 0:
            welcome_then_silent(peer)  # never answers: a connection gone half-open
            return
        peer.welcome(session="s2", token="u" * 48)
        attach = peer.receive()
        assert attach is not None and attach["cmd"] == "attach" and attach["args"]["token"] == "t" * 48
        peer.reply(attach, {"session": "s1", "rev": 0, "replayed": 0, "snapshot": False})
        echo_commands_after_welcome(peer)

    server = fake(script)
    with Client.connect(port=server.port, reconnect=True, health_check_interval=0.1, timeout=0.5) as vl:
        time.sleep(0.2)
        assert vl.command("ping")["sent"]["line"] == "ping"
        assert vl.resumed == 1


def test_the_asyncio_ping_interval_resumes_a_half_open_connection(fake):
    def script(peer: Peer) -> None:
        if peer.number == 0:
            welcome_then_silent(peer)
            return
        peer.welcome(session="s2", token="u" * 48)
        attach = peer.receive()
        assert attach is not None and attach["cmd"] == "attach"
        peer.reply(attach, {"session": "s1", "rev": 0, "replayed": 0, "snapshot": False})
        echo_commands_after_welcome(peer)

    server = fake(script)

    async def scenario():
        async with AsyncClient.connect(port=server.port, reconnect=True, ping_interval=0.1, timeout=0.3) as vl:
            for _ in range(50):
                if vl.resumed:
                    break
                await asyncio.sleep(0.1)
            assert vl.resumed == 1
            assert (await vl.command("ping"))["sent"]["line"] == "ping"
    run(scenario())


def echo_commands_after_welcome(peer: Peer) -> None:
    while (message := peer.receive()) is not None:
        peer.reply(message, {"sent": message})


def test_backoff_is_pluggable_and_attempts_are_bounded(fake):
    calls = []

    def script(peer: Peer) -> None:
        peer.welcome()
        peer.receive()
        peer.close()  # then the port is closed: every reconnect fails

    server = fake(script)
    vl = Client.connect(port=server.port, reconnect=True, reconnect_attempts=3, backoff=lambda n: calls.append(n) or 0.01)
    server.stop()
    with pytest.raises(ConnectionClosed):
        vl.command("ping")
    assert calls == [0, 1, 2]


# -- what the server sends ----------------------------------------------------

def test_a_line_that_is_not_json_is_skipped(fake):
    def script(peer: Peer) -> None:
        peer.send(b"<html>not a viewline server</html>")
        peer.welcome()
        message = peer.receive()
        peer.send(b"\x00garbage")
        peer.reply(message, {"pong": True})
        welcome_then_silent_after(peer)

    server = fake(script)
    with Client.connect(port=server.port) as vl:
        assert vl.command("ping") == {"pong": True}

    async def scenario():
        async with AsyncClient.connect(port=server.port) as vl:
            assert await vl.command("ping") == {"pong": True}
    run(scenario())


def welcome_then_silent_after(peer: Peer) -> None:
    while peer.receive() is not None:
        pass


def test_a_throwing_on_message_callback_does_not_stop_the_asyncio_client(server):
    def callback(message):
        raise RuntimeError("a bug in the callback")

    async def scenario():
        async with AsyncClient.connect(port=server.port, on_message=callback) as vl:
            assert await vl.command("ping") == {"pong": True}
            await vl.command("search golden")
            await vl.wait_for_display("search", lambda s: not s["loading"])
    run(scenario())


def test_a_throwing_predicate_reaches_the_caller_and_the_client_goes_on(server):
    async def scenario():
        async with AsyncClient.connect(port=server.port) as vl:
            await vl.command("search golden")
            with pytest.raises(ZeroDivisionError):
                await vl.wait_for(lambda m: 1 / 0)
            assert await vl.command("ping") == {"pong": True}
    run(scenario())


# -- lifecycle ----------------------------------------------------------------

def test_a_shutdown_bye_is_resumed_and_a_final_bye_is_not(fake):
    def script(peer: Peer) -> None:
        if peer.number == 0:
            peer.welcome()
            message = peer.receive()
            sent_first.append(message)
            peer.send({"type": "bye", "reason": "server shutting down", "code": "shutdown"})
            peer.close()
            return
        peer.welcome(session="s2", token="u" * 48)
        attach = peer.receive()
        assert attach is not None and attach["args"] == {"token": "t" * 48, "lastRev": 0}
        peer.reply(attach, {"session": "s1", "rev": 0, "replayed": 0, "snapshot": False})
        message = peer.receive()
        sent_again.append(message)
        peer.send({"type": "bye", "reason": "session ended", "code": "ended"})
        peer.close()

    sent_first: list = []
    sent_again: list = []
    server = fake(script)
    with Client.connect(port=server.port, reconnect=True) as vl:
        # The shutdown's `bye` came before the ping's reply, so the ping never ran
        # (PROTOCOL §4): it goes again on the resumed connection, whose server ends the
        # session instead of answering.
        with pytest.raises(ConnectionClosed) as caught:
            vl.command("ping")
        assert vl.resumed == 1
        assert sent_again == sent_first and "ping" in str(sent_first[0])
        assert caught.value.session_ended and caught.value.bye["code"] == "ended"
        assert [e["code"] for e in vl.events(timeout=2)] == ["shutdown", "ended"]
        with pytest.raises(ConnectionClosed) as caught:
            vl.next_event()
        assert caught.value.session_ended and caught.value.bye["code"] == "ended"
    assert server.connections == 2


def test_quit_ends_the_session_and_close_keeps_it(server):
    with Client.connect(port=server.port) as kept:
        token = kept.token
        kept.command("search golden")
    with Client.connect(port=server.port) as other:
        assert other.attach(token)["session"] == kept.session  # closing kept the session
        other.quit()
        assert other.closed
    with Client.connect(port=server.port) as third:
        with pytest.raises(ViewlineError) as caught:
            third.attach(token)
        assert caught.value.code == "bad_token"

    async def scenario():
        vl = await AsyncClient.connect(port=server.port)
        token = vl.token
        await vl.quit()
        async with AsyncClient.connect(port=server.port) as other:
            with pytest.raises(ViewlineError):
                await other.attach(token)
    run(scenario())


def test_a_snapshot_resets_views_alert_and_rev(server):
    with Client.connect(port=server.port) as owner, Client.connect(port=server.port) as other:
        owner.command("contacts")
        owner.settle()
        other.command("fault save 1 down")
        other.command("login alice wonderland")
        other.command("draft lost")
        for query in ("a", "b", "c", "d", "e", "f"):
            other.command(f"search {query}")
        other.settle()
        other.command("save")
        other.wait_for_alert()
        rev_before = other.rev
        assert other.alert is not None and rev_before >= 12
        result = other.attach(owner.token)
        assert result["snapshot"]
        # Nothing of the old session lingers (what has arrived of the snapshot may show).
        assert other.alert is None and other.views.get("draft", {"text": ""})["text"] == ""
        other.wait_for_display("playlist")  # the snapshot's last view
        assert other.views["draft"]["text"] == "" and other.views["search"]["query"] == ""
        assert other.views["contacts"] == owner.views["contacts"]
        assert result["rev"] < other.rev < rev_before  # the attached session's revs, not the old one's


def test_a_closed_client_raises_at_once_and_its_event_streams_end(server):
    vl = Client.connect(port=server.port)
    vl.close()
    started = time.monotonic()
    with pytest.raises(ConnectionClosed):
        vl.wait_for_alert(timeout=5)
    assert list(vl.events(timeout=5)) == []
    assert time.monotonic() - started < 1

    async def scenario():
        vl = await AsyncClient.connect(port=server.port)
        await vl.aclose()
        started = time.monotonic()
        with pytest.raises(ConnectionClosed):
            await vl.wait_for_alert(timeout=5)
        assert [e async for e in vl.events()] == []
        assert [e async for e in vl.events()] == []
        with pytest.raises(ConnectionClosed):
            await vl.command("ping")
        assert time.monotonic() - started < 1
    run(scenario())


def test_each_events_reader_gets_every_event_in_its_own_bounded_queue(server):
    async def scenario():
        async with AsyncClient.connect(port=server.port, max_queued_events=4) as vl:
            first, second = vl.events(), vl.events()
            got_first = asyncio.ensure_future(first.__anext__())
            got_second = asyncio.ensure_future(second.__anext__())
            await asyncio.sleep(0)
            await vl.command("search golden")
            assert (await got_first)["rev"] == (await got_second)["rev"] == 1
            for query in ("a", "b", "c", "d", "e"):
                await vl.command(f"search {query}")
            await vl.settle()
            await asyncio.sleep(0.1)
            # Nobody read for a while: each queue kept the newest four events.
            rest = [await first.__anext__() for _ in range(4)]
            assert [e["rev"] for e in rest] == list(range(vl.rev - 3, vl.rev + 1))
            assert vl.dropped_events > 0
            await first.aclose()
            await second.aclose()
    run(scenario())


def test_throttling_carries_the_wait_as_a_number(server):
    with Client.connect(port=server.port) as vl:
        with pytest.raises(ThrottledError) as caught:
            for _ in range(20):
                try:
                    vl.command("login alice wrong-password")
                except ThrottledError:
                    raise
                except ViewlineError as error:
                    assert error.code == "login_failed"
        assert caught.value.code == "login_throttled"
        assert isinstance(caught.value.retry_after, int) and caught.value.retry_after >= 1
