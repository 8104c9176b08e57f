"""What the blocking and the asyncio client share: turning a call into a command
line, a reply into its result, and the session state into the id of the alert to
answer."""
from __future__ import annotations

import json
from typing import Any, Dict, Mapping, Optional, cast

from .errors import ViewlineError, error_from_reply
from .state import SessionState

Message = Dict[str, Any]


def encode(request_id: int | str, cmd: str, args: Optional[Mapping[str, Any]]) -> bytes:
    """One command line with an id.

    Without ``args``, ``cmd`` is a line as a person types it (``"add buy milk"``) and
    goes as ``{"id":…,"line":…}``: the server splits it and maps the words to the
    command's arguments, so any app's commands work with no table in the client.
    With ``args``, ``cmd`` is a command name and goes as ``{"id":…,"cmd":…,"args":…}``.
    """
    line: Dict[str, Any] = {"id": request_id}
    if args is None:
        line["line"] = cmd
    else:
        line["cmd"] = cmd
        if args:
            line["args"] = dict(args)
    return json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def line_limit(welcome: Optional[Message]) -> Optional[int]:
    """The longest line the server that sent ``welcome`` takes (``maxLineBytes``,
    1.3): a positive whole number, else None (not said, or not a limit)."""
    limit = (welcome or {}).get("maxLineBytes")
    if isinstance(limit, bool) or not isinstance(limit, (int, float)):
        return None
    if isinstance(limit, float) and not limit.is_integer():
        return None
    return int(limit) if 0 < limit < 2**53 else None


def check_length(line: bytes, limit: Optional[int]) -> None:
    """Refuses a line (with its newline) longer than the connection's server takes
    (``line_limit``): the server's ``line_too_long`` for it could not name its id, so
    the command would wait for its reply until it timed out."""
    if limit is not None and len(line) - 1 > limit:
        raise ViewlineError("line_too_long",
                            f"the line is {len(line) - 1} bytes; the server takes at most {limit}: not sent")


def result_of(reply: Message) -> Dict[str, Any]:
    """A reply's ``result``; a failed reply raises its ``ViewlineError`` subclass."""
    if not reply.get("ok"):
        raise error_from_reply(reply)
    return cast("Dict[str, Any]", reply.get("result") or {})


#: Attach failures worth trying again on another node or a little later: the
#: session's node still counts as alive, or the node cannot reach its database,
#: or it is full.
RETRYABLE_ATTACH = ("moved", "unavailable", "server_busy", "attach_throttled")


def presented_alert_id(state: SessionState) -> str:
    if state.alert is None:
        raise ViewlineError("no_alert", "no alert is presented")
    return cast("str", state.alert["id"])


def confirm_args(state: SessionState, fields: Optional[Mapping[str, str]], alert: Optional[str]) -> Dict[str, Any]:
    args: Dict[str, Any] = {"alert": alert or presented_alert_id(state)}
    if fields:
        args["fields"] = dict(fields)
    return args


def new_token(cmd: str, args: Optional[Mapping[str, Any]], result: Mapping[str, Any]) -> Optional[str]:
    """The session's new token after ``end-others`` (which changes it): the one a
    client must resume with from now on. ``None`` for any other command."""
    name = cmd if args is not None else cmd.strip().split(" ", 1)[0]
    token = result.get("token")
    return token if name == "end-others" and isinstance(token, str) else None
