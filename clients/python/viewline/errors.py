"""Errors carrying the protocol's stable error code."""
from __future__ import annotations

from typing import Any, Dict, Optional


class ViewlineError(Exception):
    """A command failed; ``code`` is the protocol's stable snake_case error code."""

    def __init__(self, code: str, message: str, reply: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.reply = reply


class ConnectionClosed(ViewlineError):
    """The server closed the connection (after ``bye`` or otherwise)."""

    def __init__(self, reason: str = "connection closed") -> None:
        super().__init__("connection_closed", reason)


class Timeout(ViewlineError):
    """Nothing matching arrived in time."""

    def __init__(self, what: str) -> None:
        super().__init__("client_timeout", f"timed out waiting for {what}")


def is_event(message: Any) -> bool:
    return isinstance(message, dict) and message.get("type") in ("display", "alert", "dismiss", "bye")
