"""A log given as a stream of byte chunks, classified in memory that does not grow with its length.

Lines are split on ``\\n`` only (line numbers agree with ``grep -n``). A line longer than ``max_line_chars``
is classified by its head and tail (a 50 MB line of a logged prompt ends in the exception that matters), so
no line is ever held whole.
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Iterator

from toolkit.errors import ToolkitError
from toolkit.logs.classify import LogClassifier
from toolkit.logs.rules import Rule
from toolkit.logs.skim import Skimmer
from toolkit.logs.summary import LogSummary, SummaryBuilder

__all__ = ["iter_lines", "iter_line_batches", "classify_chunks", "MAX_LINE_CHARS"]

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
    """The lines of a byte stream; ToolkitError when it is empty or its first bytes are binary.

    >>> list(iter_lines([b"a\\nb", b"c\\n", b"d"]))
    ['a', 'bc', 'd']
    """
    for batch in iter_line_batches(chunks, max_line_chars=max_line_chars, name=name):
        yield from batch


def iter_line_batches(chunks: Iterable[bytes], *, max_line_chars: int = MAX_LINE_CHARS,
                      name: str = "the input", live: bool = False) -> Iterator[list[str]]:
    """:func:`iter_lines` a chunk's worth at a time: one ``split`` per chunk, no Python step per line.

    ``live``: a followed log, which may be empty or start with any bytes. The followers use this too
    (issue 25: ``pending += chunk; rfind`` took 26.6 s and 305 MB on a 50 MB line).
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
            if not live and _looks_binary(text[:_SNIFF_CHARS]):
                raise ToolkitError(f"{name} is binary, not a text log (NUL bytes or mostly undecodable bytes in its "
                                   "first 8 KiB)", evidence=[repr(chunk[:60])],
                                   hint="pass the server's log file (text); decompress it first if it is gzipped")
        parts = text.split("\n")
        batch: list[str] = []
        for k, piece in enumerate(parts):
            last = k == len(parts) - 1
            if k == 1 and not last and not cut and len(parts) > 2 and max(map(len, parts[1:-1])) <= max_line_chars:
                batch.extend(parts[1:-1])  # the common case: every whole line of the chunk at once
                pending = ""
                piece, last = parts[-1], True
            if cut or len(pending) + len(piece) > max_line_chars:
                pending, tail, cut = _keep_ends(pending, tail, cut, piece, half)
                if last:
                    break
                batch.append(f"{pending} [... {cut} characters not read ...] {tail}")
            elif last:
                pending += piece
                break
            else:
                batch.append(pending + piece if pending else piece)
            pending, tail, cut = "", "", 0
        if batch:
            yield batch
    if not sniffed and not live:
        raise ToolkitError(f"{name} is empty: there is no log line to classify",
                           hint="check the path, and that the server has written to its log yet")
    rest = decoder.decode(b"", final=True)
    if rest:
        pending, tail, cut = _keep_ends(pending, tail, cut, rest, half) if cut else (pending + rest, tail, cut)
    if pending or tail:
        yield [f"{pending} [... {cut} characters not read ...] {tail}" if cut else pending]


def _keep_ends(head: str, tail: str, cut: int, piece: str, half: int) -> tuple[str, str, int]:
    """A too-long line: keep its first ``half`` characters and its last ``half``, count what falls between."""
    if not cut:  # first time over the limit: the head so far becomes the kept head
        joined = head + piece
        rest = joined[half:]
        return joined[:half], rest[-half:], len(rest) - len(rest[-half:])
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
    # The fast lane (toolkit.logs.skim): what `logs classify` of 2M lines spends its time in.
    skimmer: Skimmer | None = None
    # keeping every row, the classifier parses each metric line and counts only those that parse: feed them
    capped = max_metrics is not None
    rules = classifier.skimmable()
    for batch in iter_line_batches(chunks, max_line_chars=max_line_chars, name=name):
        i, n = 0, len(batch)
        while i < n:
            if rules is not None:
                if skimmer is None or skimmer.rules is not rules:
                    skimmer = Skimmer(rules)
                metrics: list[int] | None = [] if capped else None
                end = skimmer.skim(batch, i, metrics)
                if metrics:  # batch[k] is line `classifier.line_no + 1 + k - i` of the log
                    builder.add_metric_lines(batch, metrics, classifier.line_no + 1 - i)
                classifier.line_no += end - i
                i = end
                if i == n:
                    break
            for event in feed(batch[i]):
                add(event)
            i += 1
            rules = classifier.skimmable()
    for event in classifier.end_of_log():
        add(event)
    return builder.summary()
