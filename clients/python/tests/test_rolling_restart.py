"""A rolling restart of a two-node cluster: each node in turn gets SIGTERM (it hands
its sessions over and says `bye` with code `shutdown`) and comes back, and a
reconnecting client carries on in the same session through both, blocking and
asyncio alike."""
from __future__ import annotations

import asyncio
import socket

import pytest

from viewline import AsyncClient, Client, ViewlineError


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Cluster:
    def __init__(self, make_server, postgres, *arguments: str) -> None:
        self.make_server = make_server
        self.arguments = arguments
        self.url = postgres.new_database()
        self.ports = [free_port(), free_port()]
        self.nodes = [self.start(port) for port in self.ports]

    def start(self, port: int):
        return self.make_server("--postgres", self.url, "--node-timeout", "1", "--drain-seconds", "1", "--port", str(port), *self.arguments)

    def stop(self, index: int) -> None:
        """SIGTERM node ``index`` and wait for its clean exit."""
        node = self.nodes[index]
        node.proc.terminate()
        assert node.proc.wait(timeout=20) == 0

    def restart(self, index: int) -> None:
        self.nodes[index] = self.start(self.ports[index])


def test_a_blocking_client_carries_on_through_a_rolling_restart(make_server, postgres):
    cluster = Cluster(make_server, postgres)
    a, b = cluster.ports
    with Client.connect(port=a, reconnect=True, nodes=[("127.0.0.1", b)], timeout=20) as vl:
        vl.command("login alice wonderland")
        vl.command("search golden")
        vl.wait_for_display("search", lambda s: not s["loading"])
        session, token = vl.session, vl.token
        for index in (0, 1):  # the client is on this node now
            cluster.stop(index)
            bye = vl.wait_for(lambda m: m.get("type") == "bye", timeout=20)
            assert bye["code"] == "shutdown"
            assert vl.command("state session")["state"] == {"user": "alice", "loggedIn": True}  # on the other node
            assert vl.command("state search")["state"]["query"] == "golden"
            assert vl.resumed == index + 1 and vl.token == token and vl.session == session
            cluster.restart(index)


def test_a_blocking_client_idle_while_its_node_drains_sends_its_next_command_on_the_next_node(make_server, postgres):
    # The client reads nothing while its node shuts down: the `bye` waits in the socket.
    # Its next command must not go out on that connection (and fail as "may or may not
    # have run"): it goes out on the resumed one and simply works.
    cluster = Cluster(make_server, postgres)
    a, b = cluster.ports
    with Client.connect(port=a, reconnect=True, nodes=[("127.0.0.1", b)], timeout=20) as vl:
        vl.command("login alice wonderland")
        cluster.stop(0)  # SIGTERM, and its clean exit: the bye and the close are sent
        assert vl.command("state session")["state"] == {"user": "alice", "loggedIn": True}
        assert vl.resumed == 1
        assert any(m.get("type") == "bye" and m["code"] == "shutdown" for m in vl._events)


def test_an_asyncio_client_carries_on_through_a_rolling_restart(make_server, postgres):
    cluster = Cluster(make_server, postgres)
    a, b = cluster.ports

    async def scenario() -> None:
        async with AsyncClient.connect(port=a, reconnect=True, nodes=[f"127.0.0.1:{b}"], timeout=20) as vl:
            await vl.command("login bob builder")
            await vl.command("search pizza")
            await vl.wait_for_display("search", lambda s: not s["loading"])
            token = vl.token
            loop = asyncio.get_running_loop()
            for index in (0, 1):  # the client is on this node now
                await loop.run_in_executor(None, cluster.stop, index)
                bye = await vl.wait_for(lambda m: m.get("type") == "bye", timeout=20)
                assert bye["code"] == "shutdown"
                assert (await vl.command("state session"))["state"] == {"user": "bob", "loggedIn": True}
                assert (await vl.command("state search"))["state"]["query"] == "pizza"
                assert vl.resumed == index + 1 and vl.token == token
                await loop.run_in_executor(None, cluster.restart, index)

    asyncio.run(scenario())


def test_a_command_a_shutdown_left_unanswered_never_ran_and_goes_again_to_the_next_node(make_server, postgres):
    # Node A's drain (1 s) runs out while `saved` waits 3 s on the remote store: `saved`
    # is answered (`unavailable`) before the `bye`; `state session`, pipelined behind it,
    # never ran on A, so the client sends it again on node B, where it simply works.
    cluster = Cluster(make_server, postgres, "--backend-latency", "3000")
    a, b = cluster.ports

    async def scenario() -> None:
        async with AsyncClient.connect(port=a, reconnect=True, nodes=[f"127.0.0.1:{b}"], timeout=20) as vl:
            await vl.command("login alice wonderland")
            saved = asyncio.create_task(vl.command("saved"))
            await asyncio.sleep(0.3)
            state = asyncio.create_task(vl.command("state session"))
            await asyncio.sleep(0.3)
            await asyncio.get_running_loop().run_in_executor(None, cluster.stop, 0)
            with pytest.raises(ViewlineError) as error:
                await saved
            assert error.value.code == "unavailable"
            assert (await state)["state"] == {"user": "alice", "loggedIn": True}
            assert vl.resumed == 1

    asyncio.run(scenario())
