"""What comes off the wire, checked before a client acts on it: lines no longer than
a limit, JSON parsed strictly, and the fields a client relies on of the types the
protocol gives them (PROTOCOL §1, §4). Both clients read through this module."""
from __future__ import annotations

import collections
import json
import math
from typing import Any, Deque, Dict, Optional

from .errors import ProtocolError

#: The longest server line taken by default: 1 MiB, the most a server holds for one
#: connection by default (``--max-output-bytes``, PROTOCOL §8), so no longer line is
#: ever delivered; not counting the line ending.
MAX_LINE_BYTES = 1024 * 1024
#: Events kept for the application by default, per queue, before the client stops reading.
MAX_QUEUED_EVENTS = 1024
#: The largest whole number a client takes from a server where it expects one
#: (``rev``): 2**53 - 1, exact in every JSON implementation (and the server's own bound).
MAX_SAFE_INTEGER = 2**53 - 1
#: The most bytes read from a socket at once.
READ_SIZE = 64 * 1024


def check_limit(name: str, value: int) -> int:
    """``value`` if it is a whole number of at least 1; else ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a whole number of at least 1, not {value!r}")
    return value


class LineBuffer:
    """Splits a byte stream into lines, holding at most ``limit`` bytes (plus a
    ``\\r``) of a line whose ``\\n`` has not come yet. A line longer than ``limit``
    bytes, finished or not, raises ``ProtocolError`` (``message_too_long``) as soon
    as it is seen, without buffering the rest of it."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lines: Deque[bytes] = collections.deque()
        self._partial = bytearray()

    @property
    def has_line(self) -> bool:
        """Whether a whole line is waiting to be taken with ``pop``."""
        return bool(self._lines)

    def room(self) -> int:
        """How many bytes to read next: at most ``READ_SIZE``, and no more than the
        unfinished line may still grow (so it never exceeds the limit, even briefly)."""
        return max(1, min(READ_SIZE, self.limit + 2 - len(self._partial)))

    def feed(self, data: bytes) -> None:
        """Takes bytes read from the socket; raises ``ProtocolError`` for a line too long."""
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                break
            if self._partial:
                self._partial += data[start:end]
                line = bytes(self._partial)
                self._partial.clear()
            else:
                line = data[start:end]
            if len(line) - line.endswith(b"\r") > self.limit:
                raise self._too_long()
            self._lines.append(line)
            start = end + 1
        if len(self._partial) + len(data) - start > self.limit + 1:
            raise self._too_long()
        self._partial += data[start:]

    def pop(self) -> Optional[bytes]:
        """The next whole line (without its ``\\n``), or None."""
        return self._lines.popleft() if self._lines else None

    def _too_long(self) -> ProtocolError:
        self._lines.clear()
        self._partial = bytearray()
        return ProtocolError(
            "message_too_long",
            f"the server sent a line longer than {self.limit} bytes (max_line_bytes); the connection was closed")


def _int_or_float(text: str) -> Any:
    try:
        return int(text)
    except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits): a float, as JavaScript reads it
        return float(text)


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse(line: bytes) -> Optional[Dict[str, Any]]:
    """The JSON object a line holds, or None for a line that is not one (not UTF-8,
    not JSON, ``NaN``/``Infinity``, nested too deep for Python, not an object)."""
    try:
        text = line.decode("utf-8")
        try:
            message = json.loads(text, parse_constant=_not_json)
        except ValueError:  # perhaps only an integer with more digits than Python converts
            message = json.loads(text, parse_constant=_not_json, parse_int=_int_or_float)
    except (ValueError, RecursionError):
        return None
    return message if isinstance(message, dict) else None


def whole(value: Any) -> Optional[int]:
    """``value`` as an ``int`` if it is a whole number from 0 to ``MAX_SAFE_INTEGER``
    (``3.0`` counts, as it does in JSON); None for anything else (``True``, ``-1``,
    ``1.5``, ``1e19``, ``inf``, a string)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value <= MAX_SAFE_INTEGER else None
    if isinstance(value, float) and value.is_integer() and 0 <= value <= MAX_SAFE_INTEGER:
        return int(value)
    return None


def _bad(what: str, value: Any) -> ProtocolError:
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return ProtocolError("bad_message", f"the server sent {what} ({shown}); the connection was closed")


def check(message: Dict[str, Any]) -> None:
    """Raises ``ProtocolError`` (``bad_message``) unless every field the client acts
    on has the protocol's type: a ``rev`` (an event's, an ``attach`` reply's) a whole
    number from 0 to 2**53 - 1, a reply's ``re`` a string, number or null and ``ok`` a
    boolean, its ``result``/``error`` an object, a ``display``'s ``view`` a string and
    ``state`` an object, an alert's or dismiss's ``id`` a string, a welcome's
    ``session`` and ``token`` strings, a bye's ``reason`` and ``code`` strings. Keys
    it does not know are left alone (PROTOCOL §9). A ``rev`` written ``3.0`` becomes 3."""
    kind = message.get("type")
    if kind == "reply":
        re_ = message.get("re")
        if isinstance(re_, bool) or not (re_ is None or isinstance(re_, (str, int))
                                         or (isinstance(re_, float) and math.isfinite(re_))):
            raise _bad("a reply whose re is not a string, a number or null", re_)
        ok = message.get("ok")
        if not isinstance(ok, bool):
            raise _bad("a reply whose ok is not true or false", ok)
        for key in ("result", "error"):
            if message.get(key) is not None and not isinstance(message[key], dict):
                raise _bad(f"a reply whose {key} is not an object", message[key])
        result = message.get("result")
        if isinstance(result, dict) and "replayed" in result and "rev" in result:  # an attach's
            rev = whole(result["rev"])
            if rev is None:
                raise _bad("an attach reply whose rev is not a whole number from 0 to 2**53 - 1", result["rev"])
            result["rev"] = rev
        return
    if "rev" in message:
        rev = whole(message["rev"])
        if rev is None:
            label = kind if kind in ("display", "alert", "dismiss") else "message"
            raise _bad(f"{'an' if label == 'alert' else 'a'} {label} whose rev is not a whole number from 0 to 2**53 - 1",
                       message["rev"])
        message["rev"] = rev
    if kind == "welcome":
        for key in ("session", "token"):
            if not isinstance(message.get(key), str) or not message[key]:
                raise _bad(f"a welcome whose {key} is not a string", message.get(key))
    elif kind == "display":
        if not isinstance(message.get("view"), str):
            raise _bad("a display whose view is not a string", message.get("view"))
        if not isinstance(message.get("state"), dict):
            raise _bad("a display whose state is not an object", message.get("state"))
    elif kind in ("alert", "dismiss"):
        if not isinstance(message.get("id"), str):
            raise _bad(f"{'an' if kind == 'alert' else 'a'} {kind} whose id is not a string", message.get("id"))
    elif kind == "bye":
        for key in ("reason", "code"):
            if key in message and not isinstance(message[key], str):
                raise _bad(f"a bye whose {key} is not a string", message[key])
