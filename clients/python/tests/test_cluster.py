"""Both clients against several nodes over one PostgreSQL: ``attach`` follows
``moved`` to the session's node, and a reconnect carries on on another node when the
session's node is killed."""
from __future__ import annotations

import asyncio
import time

from viewline import AsyncClient, Client


def start_cluster(make_server, postgres, count=2):
    url = postgres.new_database()
    return [make_server("--postgres", url, "--node-timeout", "1") for _ in range(count)]


def test_attach_follows_moved_to_the_node_that_owns_the_session(make_server, postgres):
    a, b = start_cluster(make_server, postgres)
    with Client.connect(port=a.port) as owner:
        owner.command("login alice wonderland")
        time.sleep(0.3)  # the session's record is written in the next batch
        with Client.connect(port=b.port) as other:
            result = other.attach(owner.token)
            assert result["snapshot"] is True
            assert other.wait_for_display("session")["user"] == "alice"
            other.command("search pizza")  # now on node A, in alice's session
            assert owner.wait_for_display("search", lambda s: s["query"] == "pizza")


def test_a_reconnect_carries_on_on_another_node_when_the_sessions_node_dies(make_server, postgres):
    a, b = start_cluster(make_server, postgres)
    with Client.connect(port=a.port, reconnect=True, nodes=[("127.0.0.1", b.port)]) as vl:
        vl.command("login bob builder")
        vl.command("draft written on node A")
        time.sleep(0.3)
        a.proc.kill()
        a.proc.wait()
        # Node B restores the session from its record once A's heartbeat expires.
        alert = vl.wait_for_alert(timeout=20)
        assert alert["message"] == "You have unsaved data from last time. Do you want to save it?"
        assert vl.resumed == 1
        assert vl.state.views["session"]["user"] == "bob"
        assert vl.state.views["draft"]["text"] == "written on node A"


def test_the_asyncio_client_follows_moved_and_carries_on_on_another_node(make_server, postgres):
    a, b = start_cluster(make_server, postgres)

    async def scenario() -> None:
        owner = await AsyncClient.connect(port=a.port, reconnect=True, nodes=[("127.0.0.1", b.port)])
        await owner.command("login alice wonderland")
        await asyncio.sleep(0.3)
        other = await AsyncClient.connect(port=b.port, reconnect=True, nodes=[("127.0.0.1", a.port)])
        assert (await other.attach(owner.token))["snapshot"] is True
        await other.wait_for_display("session", lambda s: s["user"] == "alice")
        a.proc.kill()
        a.proc.wait()
        await other.wait_for(lambda m: m.get("type") == "display" and m["view"] == "session", timeout=20)
        assert other.resumed == 1
        assert (await other.command("ping"))["pong"] is True
        await other.close()
        await owner.close()

    asyncio.run(scenario())
