"""Python client for Viewline, the remote view-model server (wire protocol v1).

Standard library only. ``Client`` blocks; ``AsyncClient`` is its asyncio twin. Both
drive any view-model: a command is sent as typed (``command("add buy milk")``) and
the server, which declares the commands, parses it.
"""
from .aio import AsyncClient
from .backoff import Backoff, ExponentialBackoff
from .client import Client
from .errors import (ConnectError, ConnectionClosed, MovedError, ProtocolError, RetryLaterError, ServerBusyError,
                     ThrottledError, Timeout, ViewlineError, printable)
from .inline import quote, split
from .messages import (Alert, ArgumentKind, Bye, ByeCode, Display, Dismiss, ErrorCode, Event, Help, HelpArgument,
                       HelpCommand, HelpView, InspectedSession, Inspection, InspectList, Reply, TimelineEntry,
                       Welcome)
from .state import SessionState

__all__ = [
    "Client", "AsyncClient", "ViewlineError", "ConnectionClosed", "ConnectError", "ProtocolError", "Timeout",
    "MovedError", "RetryLaterError", "ThrottledError", "ServerBusyError", "Backoff", "ExponentialBackoff",
    "split", "quote", "printable", "SessionState",
    "Welcome", "Reply", "Display", "Alert", "Dismiss", "Bye", "Event", "ErrorCode", "ByeCode",
    "Help", "HelpCommand", "HelpArgument", "HelpView", "ArgumentKind", "InspectList", "InspectedSession", "Inspection",
    "TimelineEntry",
]
__version__ = "1.1.0"
PROTOCOL_VERSION = 1
