"""What a client knows from the messages that passed by: each view's latest state,
the presented alert and the highest ``rev``."""
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

    def reset(self) -> None:
        """Forget everything: a snapshot follows (an attach without replay)."""
        self.views = {}
        self.alert = None
        self.rev = 0

    def observe(self, message: Dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "reply" and message.get("ok"):
            result = message.get("result") or {}
            if result.get("snapshot") is True and "replayed" in result:
                # An attach answered with a snapshot (another session, or one restored
                # from its record): every view and the alert arrive again, and `rev`
                # is that session's, so nothing from before may linger.
                self.reset()
                self.rev = int(result.get("rev") or 0)
            elif self.alert and result.get("alert") == self.alert["id"] and "answer" in result:
                self.alert = None
            return
        rev = message.get("rev")
        if isinstance(rev, int):
            self.rev = max(self.rev, rev)
        if kind == "display":
            self.views[message["view"]] = message["state"]
        elif kind == "alert":
            self.alert = message
        elif kind == "dismiss":
            if self.alert and self.alert["id"] == message["id"]:
                self.alert = None
