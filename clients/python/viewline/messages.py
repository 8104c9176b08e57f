"""The protocol's messages as types (PROTOCOL §3–§4; protocol/schema/ is the source)."""
from __future__ import annotations

from typing import Any, Dict, List, Literal, TypedDict, Union

#: Every error code a server of this protocol version sends (PROTOCOL §7), and the
#: client's own (``connection_closed``, ``connect_failed``, ``client_timeout``).
#: An app built on ViewlineKit may declare more, so ``ViewlineError.code`` is a ``str``.
ErrorCode = Literal[
    "unknown_command", "bad_arguments", "bad_syntax", "bad_json", "bad_encoding", "bad_request",
    "line_too_long", "no_alert", "stale_alert", "no_cancel_action", "admin_disabled", "unknown_view",
    "unknown_service", "timeout", "bad_token", "attach_throttled", "busy", "moved", "unavailable",
    "server_busy", "login_required", "login_failed", "login_throttled", "nothing_to_save",
    "nothing_pending", "internal_error",
    "connection_closed", "connect_failed", "client_timeout",
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


#: What ``events()``, ``next_event`` and ``wait_for`` give.
Event = Union[Display, Alert, Dismiss, Bye]
