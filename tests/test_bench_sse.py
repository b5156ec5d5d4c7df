"""SSE framing: the WHATWG rules, and the same payloads under any split of the bytes."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.benchmark.sse import SSEDecoder

BOM = b"\xef\xbb\xbf"


def spec_oracle(stream: bytes) -> list[bytes]:
    """An independent, deliberately naive reading of the event-stream rules."""
    if stream.startswith(BOM):
        stream = stream[3:]
    lines = re.split(rb"\r\n|\r|\n", stream)[:-1]  # the text after the last line end is no line
    out, data = [], None
    for line in lines:
        if line == b"":
            if data is not None:
                out.append(b"\n".join(data))
            data = None
        elif line.startswith(b":"):
            continue
        else:
            name, sep, value = line.partition(b":")
            if sep and value.startswith(b" "):
                value = value[1:]
            if name == b"data":
                data = (data or []) + [value]
    return out


def decode_in_pieces(stream: bytes, cuts: list[int]) -> list[bytes]:
    d = SSEDecoder()
    out: list[bytes] = []
    last = 0
    for cut in sorted(set(cuts)) + [len(stream)]:
        out += d.feed(stream[last:cut])
        last = cut
    return out + d.close()


def test_common_events_and_done():
    d = SSEDecoder()
    assert d.feed(b'data: {"a":1}\n\ndata: [DONE]\n\n') == [b'{"a":1}', b"[DONE]"]
    assert d.close() == []


def test_crlf_cr_comments_multiline_and_fields():
    stream = (
        b": keep-alive\r\n\r\n"  # comment-only block: nothing
        b"event: message\r\nid: 7\r\ndata: one\r\ndata:two\r\n\r\n"
        b"data\r\rretry: 10\n\n"  # bare "data" = empty value; "\r" ends lines
        b"event: ping\n\n"
    )  # no data line: not dispatched
    assert SSEDecoder().feed(stream) == [b"one\ntwo", b""]
    assert spec_oracle(stream) == [b"one\ntwo", b""]


def test_bom_split_across_reads_is_skipped():
    d = SSEDecoder()
    assert d.feed(BOM[:1]) == [] and d.feed(BOM[1:] + b"data: x\n") == []
    assert d.feed(b"\n") == [b"x"]


def test_crlf_split_between_cr_and_lf_is_one_line_end():
    d = SSEDecoder()
    assert d.feed(b"data: a\r") == []
    assert d.feed(b"\n\r") == []  # "\r" held back: it may be half of "\r\n"
    assert d.feed(b"\ndata: b\r\n\r\n") == [b"a", b"b"]


def test_close_hands_out_an_unterminated_last_event_for_the_caller_to_judge():
    d = SSEDecoder()
    assert d.feed(b'data: {"x": 1}\n\ndata: {"trunc') == [b'{"x": 1}']
    assert d.pending == b'data: {"trunc'
    assert d.close() == [b'{"trunc']
    assert SSEDecoder().close() == []


def test_no_done_marker_is_fine():
    d = SSEDecoder()
    assert d.feed(b"data: 1\n\ndata: 2\n\n") == [b"1", b"2"]
    assert d.close() == []


_value = st.binary(max_size=12).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b""))
_ending = st.sampled_from([b"\n", b"\r\n", b"\r"])


@st.composite
def event_streams(draw: st.DrawFn) -> tuple[bytes, list[bytes]]:
    """A stream of well-formed events (mixed line endings, comments, fields) and its payloads."""
    stream, expected = BOM if draw(st.booleans()) else b"", []
    previous = None
    for _ in range(draw(st.integers(0, 6))):
        # one line-end style per event, since "\r" then "\n" would merge into one "\r\n"
        ending = draw(_ending)
        lines = []
        if draw(st.booleans()):
            lines.append(b": comment " + draw(_value))
        if draw(st.booleans()):
            lines.append(b"event: " + draw(_value))
        values = []
        for v in draw(st.lists(_value, min_size=0, max_size=3)):
            space = draw(st.booleans())
            lines.append(b"data:" + (b" " if space else b"") + v)
            values.append(v if space or not v.startswith(b" ") else v[1:])  # one space is dropped
        if not lines and previous is not None:
            ending = previous  # a lone blank line right after the last event's line end
        for line in lines:
            stream += line + ending
        stream += ending
        previous = ending
        if values:
            expected.append(b"\n".join(values))
    return stream, expected


@settings(max_examples=300, deadline=None)
@given(event_streams(), st.lists(st.integers(0, 400), max_size=12))
def test_any_split_gives_the_spec_payloads(case: tuple[bytes, list[bytes]], cuts: list[int]):
    stream, expected = case
    assert spec_oracle(stream) == expected
    assert decode_in_pieces(stream, [c for c in cuts if c <= len(stream)]) == expected


@settings(max_examples=200, deadline=None)
@given(event_streams())
def test_one_byte_at_a_time(case: tuple[bytes, list[bytes]]):
    stream, expected = case
    assert decode_in_pieces(stream, list(range(len(stream)))) == expected


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.sampled_from([b"data", b":", b" ", b"\r", b"\n", b"x", b"\xc3\xa9", b"{", BOM[:2]]), max_size=40
    ),
    st.lists(st.integers(0, 80), max_size=8),
)
def test_arbitrary_bytes_split_anywhere_match_the_whole_stream(tokens: list[bytes], cuts: list[int]):
    stream = b"".join(tokens)
    whole = decode_in_pieces(stream, [])
    assert decode_in_pieces(stream, [c for c in cuts if c <= len(stream)]) == whole
    # and on a stream that ends with a blank line, exactly the spec's events
    terminated = stream + b"\n\n"
    assert decode_in_pieces(terminated, [c for c in cuts if c <= len(terminated)]) == spec_oracle(terminated)


PREFIX, SUFFIX = b'{"choices":[{"text":"', b'","finish_reason":null}]}'
T = object()  # marks an event that take() counted instead of returning


@st.composite
def template_streams(draw: st.DrawFn) -> tuple[bytes, list[object], int]:
    """Token events (prefix + V + suffix) mixed with others, and what take() must report."""
    min_len = draw(st.integers(0, 2))
    stream, expected = b"", []
    for _ in range(draw(st.integers(0, 10))):
        kind = draw(st.sampled_from(["token", "token", "token", "other", "comment", "multi", "crlf"]))
        if kind in ("token", "crlf"):
            v = b"".join(
                draw(st.lists(st.sampled_from([b"a", b" ", b'"', b"\\", b"\xc3\xa9", b"\\\\"]), max_size=4))
            )
            data = PREFIX + v + SUFFIX
            plain = b'"' not in v and not v.endswith(b"\\") and len(v) >= min_len
            stream += b"data: " + data + (b"\r\n\r\n" if kind == "crlf" else b"\n\n")
            expected.append(T if plain else data)
        elif kind == "other":
            stream += b'data: {"usage":{"completion_tokens":3}}\n\n'
            expected.append(b'{"usage":{"completion_tokens":3}}')
        elif kind == "comment":
            stream += b": ping\n\n"
        else:
            stream += b"data: " + PREFIX + b"\ndata: x" + SUFFIX + b"\n\n"
            expected.append(PREFIX + b"\nx" + SUFFIX)  # two data lines: never a template event
    return stream + b"data: [DONE]\n\n", [*expected, b"[DONE]"], min_len


@settings(max_examples=200, deadline=None)
@given(template_streams(), st.lists(st.integers(0, 600), max_size=10))
def test_take_counts_exactly_the_template_events_under_any_split(
    case: tuple[bytes, list[object], int], cuts: list[int]
):
    stream, expected, min_len = case
    d = SSEDecoder()
    got: list[object] = []
    last = 0
    for cut in sorted({c for c in cuts if c <= len(stream)}) + [len(stream)]:
        d.push(stream[last:cut])
        last = cut
        while True:
            count, data = d.take(PREFIX, SUFFIX, min_len)
            got += [T] * count
            if data is None:
                break
            got.append(data)
    assert got + d.close() == expected
    assert d.take() == (0, None)


def test_docstring_examples():
    import doctest
    import importlib

    assert doctest.testmod(importlib.import_module("toolkit.benchmark.sse")).failed == 0
