"""What a client knows from the messages that passed by: each view's latest state,
the presented alert and the highest ``rev``."""
from __future__ import annotations

from typing import Any, Dict, Optional

from .wire import whole


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
        """Takes what a message says (checked by ``wire.check`` first; anything else is ignored)."""
        kind = message.get("type")
        if kind == "reply" and message.get("ok"):
            result = message.get("result")
            if not isinstance(result, dict):
                return
            if result.get("snapshot") is True and "replayed" in result:
                # An attach answered with a snapshot (another session, or one restored
                # from its record): every view and the alert arrive again, and `rev`
                # is that session's, so nothing from before may linger.
                self.reset()
                self.rev = whole(result.get("rev", 0)) or 0
            elif self.alert and result.get("alert") == self.alert.get("id") and "answer" in result:
                self.alert = None
            return
        rev = whole(message.get("rev"))
        if rev is not None:
            self.rev = max(self.rev, rev)
        if kind == "display":
            view, state = message.get("view"), message.get("state")
            if isinstance(view, str) and isinstance(state, dict):
                self.views[view] = state
        elif kind == "alert":
            if isinstance(message.get("id"), str):
                self.alert = message
        elif kind == "dismiss":
            if self.alert and self.alert.get("id") == message.get("id"):
                self.alert = None
