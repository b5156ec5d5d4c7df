"""Redaction in linear time finds exactly what the quadratic patterns found (issue 20: a 60 kB line, 33.6 s).

Three patterns started again at every position of one long run of name characters and
scanned to its end each time. They now try only the first start of a run
(``redaction._first_start``). These tests hold the old patterns as the oracle and check, on
text built from the characters that made them slow, that every match covers the same span
with the same groups. The time itself is measured in ``benchmarks/redaction_speed.py``.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from toolkit import redaction
from toolkit.redaction import REDACTED, redact_text

# The patterns as they were before the change (named groups only: naming a group changes no match).
OLD_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+")
OLD_URL = re.compile(r"(?i)\b(?P<user>[a-z][a-z0-9+.-]*://[^\s:/@'\"]+):(?:[^\s@/'\"]+)@")
OLD_COLON = re.compile(
    r"(?<![A-Za-z0-9_-])(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)(?P<sep>[\"']?\s*:\s*[\"']?)(?!//)(?P<value>"
    + redaction._VALUE + ")"
)
NEW_JWT = next(pattern for literal, pattern in redaction._SHAPES if literal == "eyJ")
PAIRS = {"jwt": (OLD_JWT, NEW_JWT), "url": (OLD_URL, redaction._URL_USERINFO), "colon": (OLD_COLON, redaction._COLON)}

# Pieces that build long runs with many would-be starts, and the separators the patterns look for.
PIECES = ["a", "Z", "7", "_", "-", ".", "+", "/", ":", " ", "=", "'", '"', "@", "\n", "é", "eyJ", "://", "aB3dE5fG",
          "key", "api_key", "https", "u:p@h", "Bearer ", "eyJaB3dE5fG", ".eyJaB3dE5fG."]
TEXT = st.lists(st.sampled_from(PIECES), max_size=14).map("".join)


def _matches(pattern: re.Pattern[str], text: str) -> list[tuple[int, int, dict[str, str | None]]]:
    """Each match as (start, end, groups), its start taken after the lead-in a linear pattern skipped."""
    out = []
    for match in pattern.finditer(text):
        groups = {k: v for k, v in match.groupdict().items() if k != "lead"}
        out.append((match.start() + len(match.groupdict().get("lead") or ""), match.end(), groups))
    return out


@pytest.mark.parametrize("which", sorted(PAIRS))
@settings(max_examples=600, deadline=None, derandomize=True)
@given(text=TEXT)
@example(text="-abc: x .d:e -f.g:h")
@example(text="x-eyJaB3dE5fG.eyJaB3dE5fG.a aeyJaB3dE5fG.eyJaB3dE5fG.a")
@example(text="1.a://u:p@h 9+https://u:p@h 9a://u:p@h")
def test_linear_patterns_match_what_the_old_ones_matched(which: str, text: str) -> None:
    old, new = PAIRS[which]
    assert _matches(new, text) == _matches(old, text)


def test_the_lead_in_is_kept_and_the_secret_still_goes() -> None:
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
    assert redact_text(f"x-{jwt} tail") == f"x-{REDACTED} tail"
    assert redact_text("1.9.https://bob:hunter22@example.com/x") == f"1.9.https://bob:{REDACTED}@example.com/x"
    assert redact_text("7.config.api_key: abc123 rest") == f"7.config.api_key: {REDACTED} rest"
    assert redact_text("7.config.max_len: 4096") == "7.config.max_len: 4096"


def test_long_runs_that_were_quadratic_come_back_unchanged() -> None:
    for unit in ("ab.", "ab-", "-eyJ", "a.+", "ab:"):
        line = unit * 20_000
        assert redact_text(line) == line
