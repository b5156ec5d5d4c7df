"""Text from a log, a journal or a server made inert for any output: terminal, widget, Markdown, HTML.

Issue 25: ``logs follow`` wrote a log's OSC 52 (a clipboard write), OSC 0 (the window title) and OSC 8
hyperlinks to the user's terminal byte for byte; the post-mortem kept ESC, BEL, NUL and U+202E (a
right-to-left override reverses the text after it). Escape sequences are dropped; every other control or
direction character is shown escaped (``\\x07``, ``\\u202e``), visible and harmless.
"""

from __future__ import annotations

import re

from toolkit.logs.line import strip_ansi

__all__ = ["inert_text"]

# C0 (but tab and newline), DEL, C1; the bidi embeddings, overrides and isolates, marks, and the line separators.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _shown(match: re.Match[str]) -> str:
    code = ord(match.group())
    return "\\r" if code == 13 else f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def inert_text(text: str) -> str:
    """``text`` with escape sequences dropped and every other control or direction character shown escaped.

    >>> inert_text("\\x1b]52;c;aGk=\\x07ok \\x1b[31mred\\x1b[0m \\u202eevil\\x00")
    'ok red \\\\u202eevil\\\\x00'
    """
    if text.isprintable():
        return text
    if "\x1b" in text:
        text = strip_ansi(text)
    return _UNSAFE.sub(_shown, text.replace("\r\n", "\n"))
