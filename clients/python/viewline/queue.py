"""The queue of received events both clients keep (a bounded ``deque``): what a wait
takes from it, and what a wait that found nothing gives back."""
from __future__ import annotations

import collections
from typing import Any, Callable, Dict, List

Message = Dict[str, Any]


def take_through_last(events: "collections.deque[Message]", taken: Callable[[Message], bool]) -> bool:
    """Drops the events up to and including the last one ``taken`` matches; whether it
    dropped any."""
    last = max((i for i, event in enumerate(events) if taken(event)), default=-1)
    for _ in range(last + 1):
        events.popleft()
    return last >= 0


def put_back(events: "collections.deque[Message]", passed: List[Message]) -> None:
    """Queues ``passed`` again before the rest, in order (a wait that found nothing);
    the deque's bound keeps the newest when that is more than it holds."""
    kept = passed + list(events)
    events.clear()
    events.extend(kept)
