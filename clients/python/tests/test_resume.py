"""Sessions outlive connections: attach by token, and opt-in automatic resume."""
import socket

import pytest

from conftest import validate
from viewline import Client, ConnectionClosed, ViewlineError


def drop(client: Client) -> None:
    """Cut the connection as a network failure would (no quit)."""
    client._sock.shutdown(socket.SHUT_RDWR)


def test_attach_moves_a_connection_to_another_session(server):
    with Client.connect(port=server.port, on_message=validate) as first:
        first.command("search golden")
        first.wait_for_display("search", lambda s: not s["loading"])
        with Client.connect(port=server.port, on_message=validate) as second:
            result = second.attach(first.token, last_rev=0)
            assert result == {"session": first.session, "rev": 2, "replayed": 2, "snapshot": False}
            assert second.wait_for_display("search", lambda s: not s["loading"])["query"] == "golden"
            assert second.token == first.token
            with pytest.raises(ViewlineError) as caught:
                second.attach("0" * 48)
            assert caught.value.code == "bad_token"


def test_a_search_survives_a_dropped_connection(make_server):
    server = make_server("--backend-latency", "300")
    with Client.connect(port=server.port, on_message=validate, reconnect=True) as vl:
        vl.command("search golden")
        vl.wait_for_display("search", lambda s: s["loading"])
        drop(vl)  # the results arrive while the client is away
        state = vl.wait_for_display("search", lambda s: not s["loading"], timeout=10)
        assert state["query"] == "golden" and state["results"]
        assert vl.resumed == 1
        assert vl.command("ping") == {"pong": True}


def test_a_save_retry_loop_survives_a_dropped_connection(make_server):
    server = make_server("--admin")
    with Client.connect(port=server.port, on_message=validate, reconnect=True) as vl:
        vl.command("login alice wonderland")
        vl.command("draft", {"text": "written before the drop"})
        vl.command("fault save 2 disk full")
        vl.command("save")
        vl.wait_for_alert()
        drop(vl)
        vl.confirm()  # the alert is still up on the server; the client resumed first
        vl.wait_for_alert()
        vl.confirm()
        vl.wait_for_display("draft", lambda s: not s["pending"])
        assert vl.command("saved")["drafts"][0]["text"] == "written before the drop"
        assert vl.resumed == 1


def test_a_command_sent_after_a_drop_goes_out_on_the_resumed_connection(server):
    with Client.connect(port=server.port, reconnect=True) as vl:
        session = vl.session
        drop(vl)
        assert vl.command("ping") == {"pong": True}
        assert vl.resumed == 1
        assert vl.command("state session")["view"] == "session"
        assert vl.session == session


def test_no_resume_after_quit(server):
    vl = Client.connect(port=server.port, reconnect=True)
    vl.command("quit")
    with pytest.raises(ConnectionClosed):
        vl.next_message(timeout=2)
        vl.next_message(timeout=2)
    assert vl.resumed == 0


def test_end_others_takes_the_session_back_and_keeps_the_new_token(make_server):
    server = make_server("--backend-latency", "0")
    with Client.connect(port=server.port, on_message=validate, reconnect=True) as owner, \
            Client.connect(port=server.port, on_message=validate, reconnect=True) as other:
        old = owner.token
        other.attach(old)
        assert owner.wait_for_display("connections", lambda s: s["count"] == 2)
        result = owner.end_others()
        assert result["ended"] == 1 and owner.token == result["token"] != old
        assert owner.wait_for_display("connections", lambda s: s["count"] == 1)
        # The other connection is told it was revoked (final: it does not resume).
        with pytest.raises(ConnectionClosed) as caught:
            while True:
                other.next_message(timeout=5)
        assert caught.value.bye["code"] == "revoked" and caught.value.session_ended
        assert other.resumed == 0
        with Client.connect(port=server.port) as intruder, pytest.raises(ViewlineError) as refused:
            intruder.attach(old)
        assert refused.value.code == "bad_token"
        # The owner resumes with the new token after a drop.
        drop(owner)
        assert owner.command("ping") == {"pong": True}
        assert owner.resumed == 1


def test_the_asyncio_client_resumes_a_dropped_search(make_server):
    import asyncio
    from viewline import AsyncClient
    server = make_server("--backend-latency", "300")

    async def scenario() -> None:
        async with await AsyncClient.connect(port=server.port, reconnect=True) as vl:
            await vl.command("search golden")
            await vl.wait_for_display("search", lambda s: s["loading"])
            vl._writer.transport.abort()  # the results arrive while the client is away
            state = await vl.wait_for_display("search", lambda s: not s["loading"])
            assert state["query"] == "golden" and state["results"]
            assert vl.resumed == 1
            assert await vl.command("ping") == {"pong": True}

    asyncio.run(scenario())
