"""What the blocking and the asyncio client share: turning a call into a JSON
command line, a reply into its result, and the session state into the id of the
alert to answer."""
from __future__ import annotations

import json
from typing import Any, Dict, Optional, Tuple, cast

from .errors import ViewlineError
from .inline import parse_inline
from .state import SessionState

Message = Dict[str, Any]


def resolve(cmd: str, args: Dict[str, Any]) -> Tuple[str, Dict[str, Any]]:
    """``("search thai food", {})`` or ``("search", {"query": ...})`` → name and args."""
    if args or " " not in cmd.strip():
        return cmd.strip(), args
    return parse_inline(cmd)


def encode(request_id: int | str, name: str, args: Dict[str, Any]) -> bytes:
    """The JSON form of a command, as one line."""
    line: Dict[str, Any] = {"id": request_id, "cmd": name}
    if args:
        line["args"] = args
    return json.dumps(line, ensure_ascii=False).encode("utf-8") + b"\n"


def result_of(reply: Message) -> Dict[str, Any]:
    """A reply's ``result``; a failed reply raises ``ViewlineError`` with its code."""
    if not reply["ok"]:
        raise ViewlineError(reply["error"]["code"], reply["error"]["message"], reply)
    return cast("Dict[str, Any]", reply["result"])


def moved_address(error: ViewlineError) -> Optional[Tuple[str, int]]:
    """Where a ``moved`` error says the session lives (``host``, ``port``), else None."""
    if error.code != "moved" or not error.reply:
        return None
    return parse_address(str(error.reply.get("error", {}).get("address", "")))


def parse_address(text: str) -> Optional[Tuple[str, int]]:
    """``host:port`` or ``[v6]:port`` as a tuple; None if it is not one."""
    host, _, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    return host, int(port)


#: Attach failures worth trying again on another node or a little later: the
#: session's node still counts as alive, or the node cannot reach its database.
RETRYABLE_ATTACH = ("moved", "unavailable")


def presented_alert_id(state: SessionState) -> str:
    if state.alert is None:
        raise ViewlineError("no_alert", "no alert is presented")
    return cast("str", state.alert["id"])
