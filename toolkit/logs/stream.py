"""A log given as a stream of byte chunks, classified in memory that does not grow with its length.

The CLI reads a file in chunks and feeds them here: bytes are decoded as UTF-8 (errors
replaced) chunk by chunk, split on ``\\n`` only (line numbers agree with ``grep -n``), and
each line goes through one :class:`~toolkit.logs.classify.LogClassifier` into a capped
:class:`~toolkit.logs.summary.SummaryBuilder`. A line longer than ``max_line_chars`` is
classified by its head and tail (a 50 MB line of a logged prompt ends in the exception
that matters), so no line is ever held whole. Input that is empty, or binary rather than
text, is refused with a :class:`~toolkit.errors.ToolkitError` that says so.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Iterator

from toolkit.errors import ToolkitError
from toolkit.logs.classify import LogClassifier
from toolkit.logs.rules import Rule
from toolkit.logs.summary import LogSummary, SummaryBuilder

__all__ = ["iter_lines", "classify_chunks", "MAX_LINE_CHARS"]

MAX_LINE_CHARS = 64 * 1024
_SNIFF_CHARS = 8192
# Text logs hold printable characters, tabs, CR/LF, ANSI escapes and the odd BEL or backspace.
_TEXT_CONTROLS = frozenset("\t\n\r\x1b\x07\x08\x0c")


def _looks_binary(sample: str) -> bool:
    """NUL bytes, or mostly undecodable bytes and control characters: not a text log."""
    if "\x00" in sample:
        return True
    odd = sum(1 for c in sample if c == "\ufffd" or (c < " " and c not in _TEXT_CONTROLS))
    return odd > len(sample) * 0.3


def iter_lines(chunks: Iterable[bytes], *, max_line_chars: int = MAX_LINE_CHARS, name: str = "the input") -> Iterator[str]:
    """The lines of a byte stream (without their ``\\n``; a last line without one included).

    >>> list(iter_lines([b"a\\nb", b"c\\n", b"d"]))
    ['a', 'bc', 'd']

    Raises ToolkitError when the stream is empty or its first bytes are binary.
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    half = max(max_line_chars // 2, 1)
    pending = ""  # the current line so far: whole, or its head once it grew too long
    tail = ""  # the last `half` characters of a too-long line
    cut = 0  # characters dropped from the middle of the current line
    sniffed = False
    for chunk in chunks:
        if not chunk:
            continue
        text = decoder.decode(chunk)
        if not sniffed:
            sniffed = True
            if _looks_binary(text[:_SNIFF_CHARS]):
                raise ToolkitError(f"{name} is binary, not a text log (NUL bytes or mostly undecodable bytes in its "
                                   "first 8 KiB)", evidence=[repr(chunk[:60])],
                                   hint="pass the server's log file (text); decompress it first if it is gzipped")
        start = 0
        while True:
            end = text.find("\n", start)
            if end < 0:
                piece = text[start:]
                if cut or len(pending) + len(piece) > max_line_chars:
                    pending, tail, cut = _keep_ends(pending, tail, cut, piece, half)
                else:
                    pending += piece
                break
            piece = text[start:end]
            if cut or len(pending) + len(piece) > max_line_chars:
                pending, tail, cut = _keep_ends(pending, tail, cut, piece, half)
                yield f"{pending} [... {cut} characters not read ...] {tail}"
            else:
                yield pending + piece if pending else piece
            pending, tail, cut = "", "", 0
            start = end + 1
    if not sniffed:
        raise ToolkitError(f"{name} is empty: there is no log line to classify",
                           hint="check the path, and that the server has written to its log yet")
    rest = decoder.decode(b"", final=True)
    if rest:
        pending, tail, cut = _keep_ends(pending, tail, cut, rest, half) if cut else (pending + rest, tail, cut)
    if pending or tail:
        yield f"{pending} [... {cut} characters not read ...] {tail}" if cut else pending


def _keep_ends(head: str, tail: str, cut: int, piece: str, half: int) -> tuple[str, str, int]:
    """A too-long line: keep its first ``half`` characters and its last ``half``, count what falls between."""
    if not cut:  # first time over the limit: the head so far becomes the kept head
        joined = head + piece
        head, rest = joined[:half], joined[half:]
        tail, cut = rest[-half:], len(rest) - len(rest[-half:])
        return head, tail, cut
    joined = tail + piece
    kept = joined[-half:]
    return head, kept, cut + len(joined) - len(kept)


def classify_chunks(chunks: Iterable[bytes], engine: str = "auto", *, extra_rules: Iterable[Rule] = (),
                    max_metrics: int | None = 1000, max_lines: int | None = 1000,
                    max_line_chars: int = MAX_LINE_CHARS, name: str = "the input") -> LogSummary:
    """Summarize a log given as byte chunks (a file read piece by piece), in bounded memory.

    >>> classify_chunks([b"INFO:     Application startup complete.\\n"], engine="vllm").state
    'ready'
    """
    classifier = LogClassifier(engine=engine, extra_rules=extra_rules, parse_metrics_after_ready=max_metrics is None)
    builder = SummaryBuilder(max_metrics=max_metrics, max_lines=max_lines)
    feed, add = classifier.feed, builder.add
    for line in iter_lines(chunks, max_line_chars=max_line_chars, name=name):
        for event in feed(line):
            add(event)
    for event in classifier.finish():
        add(event)
    return builder.summary()
