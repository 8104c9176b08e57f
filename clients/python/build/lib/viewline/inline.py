"""The inline command grammar of protocol v1: the same tokenizer the server uses.

``split`` turns a line into words and ``quote`` is its inverse for one word, so a
program can build a line from values that hold spaces or quotes
(``"draft " + quote(text)``). Which words a command takes is the server's business:
the client sends a line as typed (``{"id":…,"line":…}``) and the server maps it to
the command's arguments, for the seed apps and any app built on ViewlineKit alike.
"""
from __future__ import annotations

from typing import List

from .errors import ViewlineError

__all__ = ["split", "quote"]

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
