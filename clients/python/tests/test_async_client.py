"""The asyncio client against a real server."""
import asyncio

import pytest

from conftest import validate
from viewline import AsyncClient, ViewlineError


def run(coro):
    return asyncio.run(coro)


def test_search_and_events(server):
    async def main():
        async with await AsyncClient.connect(port=server.port, on_message=validate) as vl:
            await vl.command("search thai food")
            seen = []
            async for event in vl.events():
                seen.append(event)
                if event["type"] == "display" and not event["state"]["loading"]:
                    break
            assert [e["state"]["loading"] for e in seen] == [True, False]
            assert vl.views["search"]["results"]
    run(main())


def test_retry_loop_and_errors(server):
    async def main():
        vl = await AsyncClient.connect(port=server.port, on_message=validate)
        with pytest.raises(ViewlineError) as caught:
            await vl.command("save")
        assert caught.value.code == "login_required"
        await vl.command("login", {"user": "bob", "password": "builder"})
        await vl.command("draft", {"text": "async note"})
        await vl.command("fault save 1 offline")
        await vl.command("save")
        alert = await vl.wait_for_alert()
        assert alert["actions"][1]["label"] == "Discard"
        await vl.confirm()
        await vl.wait_for_display("draft", lambda s: not s["pending"])
        assert (await vl.command("saved"))["drafts"][0]["text"] == "async note"
        await vl.close()
    run(main())


def test_concurrent_commands_get_their_own_replies(server):
    async def main():
        async with await AsyncClient.connect(port=server.port) as vl:
            results = await asyncio.gather(*(vl.command("ping") for _ in range(20)), vl.command("state", {"view": "draft"}))
            assert results[:20] == [{"pong": True}] * 20
            assert results[20]["view"] == "draft"
    run(main())


def test_async_attach_replays_what_the_first_connection_saw(server):
    async def scenario() -> None:
        async with await AsyncClient.connect(port=server.port) as first:
            await first.command("search golden")
            await first.wait_for_display("search", lambda s: not s["loading"])
            async with await AsyncClient.connect(port=server.port) as second:
                result = await second.attach(first.token, last_rev=1)
                assert result["replayed"] == 1 and not result["snapshot"]
                state = await second.wait_for_display("search")
                assert state["query"] == "golden" and not state["loading"]

    asyncio.run(scenario())
