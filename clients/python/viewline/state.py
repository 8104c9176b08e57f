"""What a client knows from the messages that passed by: each view's latest state
and the presented alert."""
from __future__ import annotations

from typing import Any, Dict, Optional


class SessionState:
    def __init__(self) -> None:
        #: The latest state of every view displayed so far.
        self.views: Dict[str, Dict[str, Any]] = {}
        #: The alert presented now, or ``None``.
        self.alert: Optional[Dict[str, Any]] = None
        #: The highest ``rev`` seen.
        self.rev = 0

    def observe(self, message: Dict[str, Any]) -> None:
        kind = message.get("type")
        if "rev" in message:
            self.rev = max(self.rev, message["rev"])
        if kind == "display":
            self.views[message["view"]] = message["state"]
        elif kind == "alert":
            self.alert = message
        elif kind == "dismiss":
            if self.alert and self.alert["id"] == message["id"]:
                self.alert = None
        elif kind == "reply" and message.get("ok"):
            result = message.get("result") or {}
            if self.alert and result.get("alert") == self.alert["id"] and "answer" in result:
                self.alert = None
