"""How long to wait between reconnect attempts."""
from __future__ import annotations

import random
from typing import Callable

#: Seconds to wait before reconnect attempt ``n`` (0 for the first retry round).
Backoff = Callable[[int], float]


class ExponentialBackoff:
    """``base * 2**n`` seconds, at most ``cap``, with full jitter (a random wait
    between 0 and that), so clients that lost one server do not all come back at
    once: redis-py's ``ExponentialWithJitterBackoff``."""

    def __init__(self, base: float = 0.05, cap: float = 2.0, jitter: bool = True) -> None:
        self.base = base
        self.cap = cap
        self.jitter = jitter

    def __call__(self, attempt: int) -> float:
        delay: float = min(self.cap, self.base * (2 ** min(attempt, 30)))
        return random.uniform(0, delay) if self.jitter else delay


def constant(seconds: float) -> Backoff:
    """The same wait before every attempt."""
    return lambda attempt: seconds
