"""Examples/Todos, a view-model the client has never heard of, driven from Python:
its commands go as typed and the server parses them. `./dev test` runs this after
building the example, with VIEWLINE_TODO_SERVER set to its todo-server binary."""
from __future__ import annotations

import asyncio
import os
import subprocess
import tempfile
from typing import Iterator

import pytest

from viewline import AsyncClient, Client, ViewlineError

TODO_SERVER = os.environ.get("VIEWLINE_TODO_SERVER")

pytestmark = pytest.mark.skipif(not TODO_SERVER, reason="VIEWLINE_TODO_SERVER (Examples/Todos' todo-server) not given")


@pytest.fixture
def todo_port() -> Iterator[int]:
    assert TODO_SERVER
    process = subprocess.Popen([TODO_SERVER, "0", "0"], cwd=tempfile.mkdtemp(), stdout=subprocess.PIPE)
    assert process.stdout is not None
    line = process.stdout.readline().decode()
    assert line.startswith("listening on"), line
    yield int(line.rsplit(":", 1)[1])
    process.terminate()
    process.wait(10)


def test_the_blocking_client_drives_the_todos_example(todo_port):
    with Client.connect(port=todo_port) as vl:
        names = [c["name"] for c in vl.command("help")["commands"]]
        assert {"add", "done", "delete"} <= set(names)
        vl.command("add buy milk")
        vl.command("add", {"title": "walk the dog"})
        todos = vl.wait_for_display("todos", lambda s: len(s["items"]) == 2)
        assert [t["title"] for t in todos["items"]] == ["buy milk", "walk the dog"]
        first = todos["items"][0]["id"]
        vl.command(f"done {first}")
        assert vl.wait_for_display("todos", lambda s: s["items"][0]["done"])["items"][0]["title"] == "buy milk"
        vl.command(f"delete {first}")
        alert = vl.wait_for_alert()
        assert [a["label"] for a in alert["actions"]] == ["Undo", "Keep deleted"]
        vl.confirm()  # Undo
        vl.wait_for_display("todos", lambda s: any(t["title"] == "buy milk" for t in s["items"]))
        with pytest.raises(ViewlineError) as caught:
            vl.command("add")
        assert caught.value.code == "bad_arguments" and "add <title>" in caught.value.message


def test_the_asyncio_client_drives_the_todos_example(todo_port):
    async def scenario() -> None:
        async with AsyncClient.connect(port=todo_port) as vl:
            await vl.command('add "quoted \\"title\\" with  spaces"')
            todos = await vl.wait_for_display("todos", lambda s: len(s["items"]) == 1)
            assert todos["items"][0]["title"] == 'quoted "title" with  spaces'
    asyncio.run(scenario())
