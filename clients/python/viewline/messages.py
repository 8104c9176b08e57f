"""The protocol's messages as types (PROTOCOL §3–§4; protocol/schema/ is the source)."""
from __future__ import annotations

from typing import Any, Dict, List, Literal, TypedDict, Union

#: Every error code a server of this protocol version sends (PROTOCOL §7), and the
#: client's own (``connection_closed``, ``connect_failed``, ``client_timeout``, and
#: ``ProtocolError``'s ``message_too_long`` and ``bad_message``).
#: An app built on ViewlineKit may declare more, so ``ViewlineError.code`` is a ``str``.
ErrorCode = Literal[
    "unknown_command", "bad_arguments", "bad_syntax", "bad_json", "bad_encoding", "bad_request",
    "line_too_long", "no_alert", "stale_alert", "no_cancel_action", "admin_disabled", "unknown_view",
    "unknown_service", "timeout", "bad_token", "attach_throttled", "busy", "moved", "unavailable",
    "record_unreadable", "server_busy", "login_required", "login_failed", "login_throttled", "nothing_to_save",
    "nothing_pending", "internal_error",
    "connection_closed", "connect_failed", "client_timeout", "message_too_long", "bad_message",
]

#: ``bye`` codes (PROTOCOL §4).
ByeCode = Literal["quit", "ended", "expired", "evicted", "revoked", "moved", "shutdown", "refused"]


class _WelcomeOptional(TypedDict, total=False):
    minor: int  # the protocol's minor version, from 1.3 (PROTOCOL §9)


class Welcome(_WelcomeOptional):
    type: Literal["welcome"]
    protocol: int
    session: str
    token: str
    server: str


class _ErrorObjectOptional(TypedDict, total=False):
    address: str  # with ``moved``
    retryAfter: int  # with throttling and ``server_busy``


class ErrorObject(_ErrorObjectOptional):
    code: str
    message: str


class _ReplyOptional(TypedDict, total=False):
    result: Dict[str, Any]  # when ``ok``
    error: ErrorObject  # when not


class Reply(_ReplyOptional):
    type: Literal["reply"]
    re: Union[str, int, None]
    ok: bool


class Display(TypedDict):
    type: Literal["display"]
    rev: int
    view: str
    state: Dict[str, Any]


class AlertAction(TypedDict):
    role: Literal["confirm", "cancel"]
    label: str


class AlertField(TypedDict):
    name: str
    label: str
    secure: bool


class _AlertOptional(TypedDict, total=False):
    fields: List[AlertField]  # only when the alert asks for input


class Alert(_AlertOptional):
    type: Literal["alert"]
    rev: int
    id: str
    title: str
    message: str
    actions: List[AlertAction]


class Dismiss(TypedDict):
    type: Literal["dismiss"]
    rev: int
    id: str


class _ByeOptional(TypedDict, total=False):
    code: str  # a ``ByeCode``; absent from servers before 1.1


class Bye(_ByeOptional):
    type: Literal["bye"]
    reason: str


#: What an argument takes (``help``'s ``arguments``, protocol 1.2).
ArgumentKind = Literal["word", "text", "integer", "fields"]


class _HelpArgumentOptional(TypedDict, total=False):
    allowsEmpty: bool  # a required word or text that may be "" (a password)
    secure: bool  # a secret: hide it as it is typed and in logs
    placeholder: str  # how the usage line shows it, when not its name
    summary: str  # what it is, in a few words
    minimum: int  # with "integer": the bounds, both included, and what it counts
    maximum: int
    unit: str


class HelpArgument(_HelpArgumentOptional):
    """One declared argument of a command, as ``help`` lists it (1.2)."""
    name: str
    kind: str  # an ``ArgumentKind``; a later server may add kinds
    required: bool


class _HelpCommandOptional(TypedDict, total=False):
    arguments: List[HelpArgument]  # 1.2; absent from older servers
    view: str  # the view-model that declares it (1.2)
    builtin: bool  # the server's own command (1.2)
    admin: bool  # runs only on a server started with admin commands
    live: bool  # may be sent as a person types: the latest wins (1.2)
    paging: bool  # fetches the next page of its view's list (1.2)
    primary: bool  # its view's main action, drawn first (1.3)


class HelpCommand(_HelpCommandOptional):
    """One command as ``help`` lists it: what a client needs to draw a form for it."""
    name: str
    usage: str
    summary: str
    args: List[str]  # the argument names in order (1.0)
    example: str


class _HelpViewOptional(TypedDict, total=False):
    busy: List[str]  # the state's booleans that are true while work is under way (1.2)
    builtin: bool  # the server's own view (``connections``)
    recorded: int  # the version of its state session records keep: it survives a restart (1.3)


class HelpView(_HelpViewOptional):
    """One view as ``help`` lists it."""
    name: str
    state: str  # the state's shape, for people


class HelpService(TypedDict):
    name: str
    summary: str


class HelpError(TypedDict):
    code: str  # an ``ErrorCode``, or an app's own
    meaning: str


class Help(TypedDict):
    """``help``'s result: every command, backend, view and error code of the server."""
    commands: List[HelpCommand]
    services: List[HelpService]
    views: List[HelpView]
    errors: List[HelpError]


class _InspectedSessionOptional(TypedDict, total=False):
    ageSeconds: float
    lastCommand: str
    lastCommandAt: str


class InspectedSession(_InspectedSessionOptional):
    """One session in ``inspect``'s list (admin only, 1.3)."""
    session: str
    rev: int
    connections: int
    address: Union[str, None]
    user: Union[str, None]
    views: List[str]
    alerts: int
    tasks: List[str]


class InspectList(TypedDict):
    """``inspect``'s result without a session: the node's sessions."""
    node: Union[Dict[str, str], None]
    count: int
    read: int
    recording: bool
    sessions: List[InspectedSession]


class _TimelineEntryOptional(TypedDict, total=False):
    durationMs: float
    #: ``command`` entries: how many runs in a row this entry stands for (absent: 1);
    #: ``durationMs`` is then the longest run's and ``at`` the last run's.
    repeats: int
    command: str
    arguments: Dict[str, Any]
    connection: int
    error: Union[str, None]
    backend: str
    event: str


class TimelineEntry(_TimelineEntryOptional):
    """One thing in a session's timeline: ``kind`` is ``command``, ``call`` or
    ``connection``, and the fields beside it follow it (PROTOCOL §3)."""
    rev: int
    at: str
    kind: str


#: ``inspect <session> [from-rev]``'s result (``from`` is a Python keyword, hence this
#: form); every secret argument shows as ``•••``. ``states`` are the views as displayed
#: at ``from`` (``None``: older than the event log reaches); ``timeline`` and
#: ``events`` come after it.
Inspection = TypedDict("Inspection", {
    "node": Union[Dict[str, str], None],
    "session": InspectedSession,
    "from": int,
    "oldestRev": int,
    "states": Dict[str, Any],
    "timeline": List[TimelineEntry],
    "events": List[Dict[str, Any]],
    "recording": bool,
})


#: What ``events()``, ``next_event`` and ``wait_for`` give.
Event = Union[Display, Alert, Dismiss, Bye]
