"""The inline command grammar of protocol v1: the same tokenizer the server uses.

``split`` turns a line into words, ``quote`` is its inverse for one word, and
``parse_inline`` maps a line to the command name and JSON ``args`` it stands for, so
inline text can be sent in the JSON form with an id.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Tuple

from .errors import ViewlineError

__all__ = ["split", "quote", "parse_inline", "COMMANDS"]

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r"}


def split(line: str) -> List[str]:
    """Split an inline line into words (double quotes group; backslash escapes inside)."""
    words: List[str] = []
    current: List[str] = []
    in_word = False
    in_quotes = False
    i = 0
    n = len(line)
    while i < n:
        c = line[i]
        if in_quotes:
            if c == "\\":
                if i + 1 >= n:
                    raise ViewlineError("bad_syntax", "unbalanced quotes: a backslash ends the line inside quotes")
                e = line[i + 1]
                current.append(_ESCAPES.get(e, e))
                i += 2
                continue
            if c == '"':
                in_quotes = False
                if i + 1 < n and line[i + 1] not in " \t":
                    raise ViewlineError("bad_syntax", "a closing quote must be followed by a space or the end of the line")
            else:
                current.append(c)
        else:
            if c in " \t\r\n":
                if in_word:
                    words.append("".join(current))
                    current = []
                    in_word = False
            elif c == '"' and not (in_word and current):
                in_word = True
                in_quotes = True
            else:
                in_word = True
                current.append(c)
        i += 1
    if in_quotes:
        raise ViewlineError("bad_syntax", "unbalanced quotes")
    if in_word:
        words.append("".join(current))
    return words


def quote(word: str) -> str:
    """Quote ``word`` so that ``split`` gives it back unchanged."""
    if word and not any(ch in word for ch in ' \t"\\\n\r'):
        return word
    out = word.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")
    return '"' + out + '"'


def _usage(name: str) -> str:
    return COMMANDS[name]


def _no_args(name: str, words: List[str]) -> Dict[str, Any]:
    if words:
        raise ViewlineError("bad_arguments", f"{name} takes no arguments; usage: {_usage(name)}")
    return {}


def _joined(key: str, name: str, words: List[str]) -> Dict[str, Any]:
    if not words:
        raise ViewlineError("bad_arguments", f"missing {key}; usage: {_usage(name)}")
    text = " ".join(words)
    if not text.strip(" \t"):
        raise ViewlineError("bad_arguments", f"{key} must not be empty; usage: {_usage(name)}")
    return {key: text}


def _optional_one(key: str, name: str, words: List[str]) -> Dict[str, Any]:
    if len(words) > 1:
        raise ViewlineError("bad_arguments", f"usage: {_usage(name)}")
    return {key: words[0]} if words else {}


def _wait(words: List[str]) -> Dict[str, Any]:
    if len(words) > 1:
        raise ViewlineError("bad_arguments", "usage: wait [timeout-ms]")
    if not words:
        return {}
    if not words[0].isdigit():
        raise ViewlineError("bad_arguments", "timeout must be a number of milliseconds; usage: wait [timeout-ms]")
    return {"timeout": int(words[0])}


def _page(words: List[str], name: str = "saved", arg: str = "page") -> Dict[str, Any]:
    usage = COMMANDS[name]
    if len(words) > 1:
        raise ViewlineError("bad_arguments", f"usage: {usage}")
    if not words:
        return {}
    if not re.fullmatch(r"-?\d+", words[0]):
        raise ViewlineError("bad_arguments", f"{arg} must be a number; usage: {usage}")
    return {arg: int(words[0])}


def _confirm(words: List[str]) -> Dict[str, Any]:
    args: Dict[str, Any] = {}
    fields: Dict[str, str] = {}
    for index, word in enumerate(words):
        if "=" in word:
            name, value = word.split("=", 1)
            if not name:
                raise ViewlineError("bad_arguments", "a field needs a name; usage: " + _usage("confirm"))
            fields[name] = value
        elif index == 0:
            args["alert"] = word
        else:
            raise ViewlineError("bad_arguments", f'expected name=value, got "{word}"; usage: ' + _usage("confirm"))
    if fields:
        args["fields"] = fields
    return args


def _login(words: List[str]) -> Dict[str, Any]:
    if len(words) != 2:
        raise ViewlineError("bad_arguments", "usage: login <user> <password>")
    return {"user": words[0], "password": words[1]}


def _fault(words: List[str]) -> Dict[str, Any]:
    if not words:
        raise ViewlineError("bad_arguments", "usage: " + _usage("fault"))
    args: Dict[str, Any] = {"service": words[0]}
    rest = words[1:]
    if rest and rest[0].lstrip("-").isdigit():
        args["count"] = int(rest[0])
        rest = rest[1:]
    if rest:
        args["message"] = " ".join(rest)
    return args


#: Every command and its usage, as the server's ``help`` lists them.
COMMANDS: Dict[str, str] = {
    "help": "help [command]",
    "ping": "ping",
    "state": "state [view]",
    "wait": "wait [timeout-ms]",
    "quit": "quit",
    "attach": "attach <token> [last-rev]",
    "sessions": "sessions",
    "info": "info",
    "slowlog": "slowlog [count]",
    "search": "search <query>",
    "confirm": "confirm [alert-id] [name=value ...]",
    "cancel": "cancel [alert-id]",
    "login": "login <user> <password>",
    "logout": "logout",
    "draft": "draft <text>",
    "save": "save",
    "saved": "saved [page]",
    "contacts": "contacts",
    "sync": "sync",
    "playlist": "playlist",
    "more": "more",
    "fault": "fault <service> [count] [message]",
}


def parse_inline(line: str) -> Tuple[str, Dict[str, Any]]:
    """Map an inline line to ``(cmd, args)``; raises ``ViewlineError`` as the server would."""
    words = split(line)
    if not words:
        raise ViewlineError("unknown_command", "empty command")
    name = words[0].lower()
    if name not in COMMANDS:
        raise ViewlineError("unknown_command", f'unknown command "{words[0]}"; try help')
    rest = words[1:]
    if name in ("search", "draft"):
        return name, _joined("query" if name == "search" else "text", name, rest)
    if name == "help":
        return name, _optional_one("command", name, rest)
    if name == "state":
        return name, _optional_one("view", name, rest)
    if name == "cancel":
        return name, _optional_one("alert", name, rest)
    if name == "wait":
        return name, _wait(rest)
    if name == "attach":
        return name, _attach(rest)
    if name == "saved":
        return name, _page(rest)
    if name == "slowlog":
        return name, _page(rest, "slowlog", "count")
    if name == "confirm":
        return name, _confirm(rest)
    if name == "login":
        return name, _login(rest)
    if name == "fault":
        return name, _fault(rest)
    return name, _no_args(name, rest)


def _attach(rest: List[str]) -> Dict[str, Any]:
    usage = COMMANDS["attach"]
    if not rest:
        raise ViewlineError("bad_arguments", f"missing token; usage: {usage}")
    if len(rest) > 2:
        raise ViewlineError("bad_arguments", f"usage: {usage}")
    args: Dict[str, Any] = {"token": rest[0]}
    if len(rest) == 2:
        if not re.fullmatch(r"-?\d+", rest[1]):
            raise ViewlineError("bad_arguments", f"lastRev must be a number; usage: {usage}")
        args["lastRev"] = int(rest[1])
    return args
