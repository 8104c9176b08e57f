"""Python client for Viewline, the remote view-model server (wire protocol v1).

Standard library only. ``Client`` blocks; ``AsyncClient`` is its asyncio twin.
"""
from .aio import AsyncClient
from .client import Client
from .errors import ConnectionClosed, Timeout, ViewlineError
from .inline import COMMANDS, parse_inline, quote, split
from .state import SessionState

__all__ = [
    "Client", "AsyncClient", "ViewlineError", "ConnectionClosed", "Timeout",
    "split", "quote", "parse_inline", "COMMANDS", "SessionState",
]
PROTOCOL_VERSION = 1
