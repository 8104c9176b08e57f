"""The blocking client driving every flow against a real server."""
import socket
import time

import pytest

from conftest import validate
from viewline import Client, ConnectionClosed, Timeout, ViewlineError


def test_welcome(client):
    assert client.session.startswith("s")
    assert len(client.token) >= 32


def test_search_inline_and_keyword_forms(client):
    assert client.command("search thai food") == {"accepted": True, "query": "thai food"}
    state = client.wait_for_display("search", lambda s: not s["loading"])
    assert state["results"] and all(r["cuisine"] == "thai" for r in state["results"])
    client.command("search", {"query": "korean"})
    client.wait_for_display("search", lambda s: s["query"] == "korean" and not s["loading"])
    assert client.views["search"]["query"] == "korean"


def test_errors_are_exceptions_with_the_protocol_code(client):
    with pytest.raises(ViewlineError) as caught:
        client.command("confirm")
    assert caught.value.code == "no_alert"
    with pytest.raises(ViewlineError) as caught:
        client.command("teleport", {"destination": "mars"})
    assert caught.value.code == "unknown_command"


def test_a_line_longer_than_the_welcome_says_is_refused_without_waiting(client):
    limit = client.welcome["maxLineBytes"]
    with pytest.raises(ViewlineError) as caught:
        client.command("search " + "x" * limit, timeout=30)
    assert caught.value.code == "line_too_long"
    assert client.command("ping") == {"pong": True}  # never sent: the connection goes on


def test_the_asyncio_client_refuses_a_line_longer_than_the_welcome_says(server):
    import asyncio
    from viewline import AsyncClient

    async def scenario() -> None:
        vl = await AsyncClient.connect(port=server.port)
        with pytest.raises(ViewlineError) as caught:
            await vl.command("search " + "x" * vl.welcome["maxLineBytes"], timeout=30)
        assert caught.value.code == "line_too_long"
        assert await vl.command("ping") == {"pong": True}
        await vl.close()

    asyncio.run(scenario())


def test_failing_save_answered_until_it_succeeds(client):
    client.command("login alice wonderland")
    client.command("draft quarterly report")
    client.command("fault save 2 disk full")
    client.command("save")
    for _ in range(2):
        alert = client.wait_for_alert()
        assert alert["title"] == "Error" and "disk full" in alert["message"]
        assert client.alert == alert
        client.confirm()
    client.wait_for_display("draft", lambda s: not s["pending"])
    assert client.alert is None
    assert client.command("saved")["drafts"][0]["text"] == "quarterly report"


def test_playlist_login_alert_with_fields_then_pages(client):
    client.command("playlist")
    alert = client.wait_for_alert()
    assert [f["name"] for f in alert["fields"]] == ["user", "password"]
    client.confirm({"user": "alice", "password": "wonderland"})
    page = client.wait_for_display("playlist", lambda s: s["step"] == "ready")
    assert len(page["items"]) == 10 and page["hasMore"]
    while client.views["playlist"]["hasMore"]:
        shown = len(client.views["playlist"]["items"])
        client.command("more")
        client.wait_for_display("playlist", lambda s: len(s["items"]) > shown)
    assert [i["position"] for i in client.views["playlist"]["items"]] == list(range(1, 33))
    with pytest.raises(ViewlineError) as caught:
        client.command("more")
    assert caught.value.code == "nothing_pending"


def test_contacts_and_a_failing_sync(client):
    client.command("contacts")
    state = client.wait_for_display("contacts", lambda s: not s["syncing"])
    client.command("fault sync 1 remote unreachable")
    client.command("sync")
    alert = client.wait_for_alert()
    assert "remote unreachable" in alert["message"]
    client.confirm()
    client.settle()
    assert client.views["contacts"]["items"] == state["items"]


def test_settle_and_event_iteration(client):
    client.command("search golden")
    client.settle()
    events = list(client.events(timeout=0.2))
    assert [e["state"]["loading"] for e in events if e["type"] == "display"] == [True, False]


def test_wait_for_times_out(client):
    with pytest.raises(Timeout):
        client.wait_for_alert(timeout=0.2)


def test_quit_says_bye_and_closes(client):
    client.command("quit")
    assert client.next_event()["type"] == "bye"
    with pytest.raises(ConnectionClosed):
        client.next_event(timeout=2)


def test_json_commands_match_the_command_schema():
    from conftest import COMMAND
    assert not list(COMMAND.iter_errors({"id": 7, "cmd": "search", "args": {"query": "thai food"}}))
    assert list(COMMAND.iter_errors({"id": 7, "command": "search"}))


def test_help_is_typed_by_the_help_typeddicts(client):
    """Every key a real server's ``help`` gives is declared in ``Help``, ``HelpCommand``,
    ``HelpArgument`` and ``HelpView``; a key some entries lack is declared optional."""
    from typing import get_args
    from viewline import ArgumentKind, Help, HelpArgument, HelpCommand, HelpView

    help = client.help()

    def check(kind, entries):
        declared = set(kind.__annotations__)
        for key in {key for entry in entries for key in entry}:
            assert key in declared, f"{kind.__name__}.{key} is not declared"
            if any(key not in entry for entry in entries):
                assert key in kind.__optional_keys__, f"{kind.__name__}.{key} is missing from some: optional"
        for key in kind.__required_keys__:
            assert all(key in entry for entry in entries), f"{kind.__name__}.{key} is required"

    # The typings declare exactly help.schema.json's properties, required where it requires.
    import json
    import pathlib
    from jsonschema import Draft202012Validator
    schema = json.loads((pathlib.Path(__file__).resolve().parents[3] / "protocol" / "schema" / "help.schema.json").read_text())
    errors = list(Draft202012Validator(schema).iter_errors(help))
    assert not errors, errors[0].message
    for kind, part in [(Help, schema), (HelpCommand, schema["$defs"]["command"]),
                       (HelpArgument, schema["$defs"]["argument"]), (HelpView, schema["$defs"]["view"])]:
        assert set(kind.__annotations__) == set(part["properties"]), kind.__name__
        assert set(kind.__required_keys__) == set(part["required"]), kind.__name__

    check(Help, [help])
    check(HelpCommand, help["commands"])
    arguments = [argument for command in help["commands"] for argument in command.get("arguments", [])]
    check(HelpArgument, arguments)
    check(HelpView, help["views"])
    assert {argument["kind"] for argument in arguments} <= set(get_args(ArgumentKind))
    primaries = {command["view"]: command["name"] for command in help["commands"] if command.get("primary")}
    assert primaries == {"search": "search", "session": "login", "draft": "draft", "contacts": "contacts", "playlist": "playlist"}


def test_an_alert_that_came_while_a_display_was_waited_for_is_still_found(client):
    client.command("login alice wonderland")
    client.command("fault save 1 disk full")
    client.command("draft x")
    client.command("save")
    client.command("search thai")
    client.wait_for_display("search", lambda s: s["query"] == "thai" and not s["loading"])
    alert = client.wait_for_alert(timeout=3)  # presented: found although the wait above went past it
    assert alert["title"] == "Error" and "disk full" in alert["message"]
    assert client.wait_for_alert(timeout=3)["id"] == alert["id"]  # still the one to answer


def test_a_state_already_shown_answers_a_wait_at_once(client):
    client.command("login alice wonderland")
    client.command("search thai")
    client.wait_for_display("search", lambda s: not s["loading"])
    assert client.wait_for_display("search", lambda s: not s["loading"], timeout=1)["query"] == "thai"
    assert client.wait_for_display("session", lambda s: s["user"] == "alice", timeout=1)


def test_an_alert_answered_elsewhere_is_not_waited_for_again(server):
    with Client.connect(port=server.port) as a, Client.connect(port=server.port) as b:
        b.attach(a.token)
        a.command("playlist")
        b.wait_for_alert()
        b.confirm({"user": "alice", "password": "wonderland"})
        time.sleep(0.3)
        with pytest.raises(Timeout):
            a.wait_for_alert(timeout=1)
        assert a.alert is None


def test_the_line_limit_is_a_positive_whole_number_or_nothing():
    from viewline.request import line_limit
    assert line_limit({"maxLineBytes": 65536}) == 65536 and line_limit({"maxLineBytes": 64.0}) == 64
    for hostile in (0, -1, 1.5, "64", True, None, 1e300, 2**63):
        assert line_limit({"maxLineBytes": hostile}) is None, hostile
    assert line_limit({}) is None
