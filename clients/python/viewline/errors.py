"""Errors carrying the protocol's stable error code.

Every error the client raises is a ``ViewlineError``; catch a subclass where you act
on it: ``MovedError`` (where the session lives), ``RetryLaterError`` and its
``ThrottledError``/``ServerBusyError`` (how long to wait), ``ConnectionClosed``
(the connection, and perhaps the session, is gone), ``ConnectError`` (the server
could not be reached), ``ProtocolError`` (the server broke the protocol and the
client closed the connection), ``Timeout`` (nothing came in time).
"""
from __future__ import annotations

import re
from typing import Any, Dict, Optional, Tuple

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` without C0 and C1 control characters (tab and newline stay): what a
    server sent, safe to print to a terminal (no escape sequences that move the
    cursor, retitle the window or hide what came before). Error messages are
    already printable; use it for alert titles, view states and the like."""
    return _CONTROL.sub("", text)


class ViewlineError(Exception):
    """A command failed; ``code`` is the protocol's stable snake_case error code
    (PROTOCOL §7), ``message`` the server's words (``printable``: without control
    characters), ``reply`` the whole reply as it came."""

    def __init__(self, code: str, message: str, reply: Optional[Dict[str, Any]] = None) -> None:
        code, message = printable(code), printable(message)
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.reply = reply


class MovedError(ViewlineError):
    """``moved``: another node serves the session; ``address`` is ``(host, port)``
    (``None`` if the server sent none the client could read)."""

    def __init__(self, message: str, reply: Optional[Dict[str, Any]] = None,
                 address: Optional[Tuple[str, int]] = None) -> None:
        super().__init__("moved", message, reply)
        self.address = address


class RetryLaterError(ViewlineError):
    """The server asks to try again later; ``retry_after`` is the seconds to wait
    (the reply's ``retryAfter``; ``None`` from a server that sends none)."""

    def __init__(self, code: str, message: str, reply: Optional[Dict[str, Any]] = None,
                 retry_after: Optional[int] = None) -> None:
        super().__init__(code, message, reply)
        self.retry_after = retry_after


class ThrottledError(RetryLaterError):
    """``login_throttled`` or ``attach_throttled``: too many failures; wait ``retry_after`` s."""


class ServerBusyError(RetryLaterError):
    """``server_busy``: the node is full or too many log-ins are being checked."""


class ConnectionClosed(ViewlineError):
    """The connection closed. ``bye`` is the server's ``bye`` when it sent one;
    ``session_ended`` says whether the session is gone for good (``quit``, or a
    final ``bye``) rather than only this connection."""

    def __init__(self, reason: str = "connection closed", bye: Optional[Dict[str, Any]] = None,
                 session_ended: bool = False) -> None:
        super().__init__("connection_closed", reason)
        self.bye = bye
        self.session_ended = session_ended


class ConnectError(ConnectionClosed):
    """The server could not be reached, refused the connection or sent no welcome in time."""

    def __init__(self, reason: str, bye: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(reason, bye)
        self.code = "connect_failed"
        self.args = (f"connect_failed: {self.message}",)


class ProtocolError(ConnectionClosed):
    """The server broke the protocol, so the client closed the connection and will
    not resume it (``session_ended`` is False: the session may live on). ``code``
    is ``message_too_long`` (a line longer than ``max_line_bytes``) or
    ``bad_message`` (a message the client cannot use: ``rev`` not a whole number
    from 0 to 2**53 - 1, a ``display`` without a ``view`` name or a ``state``
    object, a ``reply`` whose ``ok`` is not a boolean, …). Every command waiting
    for a reply, every ``wait_for`` and every ``events()`` loop raises it."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = printable(code)
        self.args = (f"{self.code}: {self.message}",)


class Timeout(ViewlineError):
    """Nothing matching arrived in time (``code`` ``client_timeout``)."""

    def __init__(self, what: str) -> None:
        super().__init__("client_timeout", f"timed out waiting for {what}")


#: The longest ``retryAfter`` taken from a server (a day); a longer one, or one that
#: is not a whole number of seconds, counts as none.
MAX_RETRY_AFTER = 86_400


def error_from_reply(reply: Dict[str, Any]) -> ViewlineError:
    """The exception a failed reply stands for: a subclass where callers act on the code."""
    error = reply.get("error")
    if not isinstance(error, dict):
        error = {}
    code = str(error.get("code", "internal_error"))
    message = str(error.get("message", ""))
    if code == "moved":
        address = error.get("address")
        return MovedError(message, reply, parse_address(address) if isinstance(address, str) else None)
    retry_after = error.get("retryAfter")
    wait = retry_after if type(retry_after) is int and 0 <= retry_after <= MAX_RETRY_AFTER else None
    if code in ("login_throttled", "attach_throttled"):
        return ThrottledError(code, message, reply, wait)
    if code == "server_busy":
        return ServerBusyError(code, message, reply, wait)
    return ViewlineError(code, message, reply)


_PORT = re.compile(r"[0-9]{1,5}")
_HOST = re.compile(r"[^\s\x00-\x1f\x7f-\x9f/@]{1,253}")


def parse_address(text: str) -> Optional[Tuple[str, int]]:
    """``host:port`` or ``[v6]:port`` as a tuple; None if it is not one (a port
    that is not 1–65535 in ASCII digits, a host with spaces or control characters)."""
    host, _, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not _HOST.fullmatch(host) or not _PORT.fullmatch(port) or not 0 < int(port) < 65536:
        return None
    return host, int(port)


#: ``bye`` codes after which the session is gone for good, for this client (PROTOCOL §4;
#: ``x-final-codes`` in protocol/schema/bye.schema.json, which the tests compare).
FINAL_BYE_CODES = frozenset({"quit", "ended", "expired", "evicted", "revoked"})
#: What servers before 1.1 (no ``code``) said in ``reason`` for the same cases.
_FINAL_BYE_REASONS = frozenset({"client quit", "session ended", "session expired", "session evicted"})


def bye_is_final(bye: Dict[str, Any]) -> bool:
    """Whether a ``bye`` ends the session (so resuming is pointless)."""
    code = bye.get("code")
    if isinstance(code, str):
        return code in FINAL_BYE_CODES
    reason = bye.get("reason")
    return isinstance(reason, str) and reason in _FINAL_BYE_REASONS
