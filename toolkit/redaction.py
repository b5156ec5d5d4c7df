"""Remove secrets before anything is stored or shown: the one function behind the journal boundary.

A journal is shared (attached to issues, pasted into chats), so every string that reaches SQLite,
a report or a plot label passes here. :func:`redact_text` takes free text, :func:`redact_mapping` an
environment, :func:`redact_spec_dict` a ``ServerSpec.to_dict()``, :func:`redact_obj` any JSON-like tree;
:class:`Redactor` adds the literal values of one launch's secrets, for the lines a server prints: SGLang
logs ``server_args=...api_key='Xk9s3cr3tpass'`` in every release to 0.5.23 (0.5.22/0.5.23
engine.py:170-171/173-174 hide only the watermark's secrets).

Two pure rules decide:

1. **By name** (:func:`is_secret_name`): the name's *last* word is a credential noun (token, key,
   secret, password, passphrase, credential(s), authorization, cookie, or a compound such as
   ``apikey``), or any word holds ``password``/``passwd``/``secret``. Near misses kept on purpose:
   ``--max-tokens``, ``TOKENIZERS_PARALLELISM``, ``HF_TOKEN_PATH`` (a file), ``KEY_VALUE_CACHE``,
   ``--ssl-keyfile``, ``PWD`` (but ``MYSQL_PWD`` is secret).
2. **By shape** (:func:`looks_like_secret`): known formats (``hf_``, ``sk-``, ``AKIA``, ``ghp_``,
   ``github_pat_``, ``glpat-``, ``xox?-``, JWTs, PEM keys, ``Bearer x``, ``user:pass@`` in URLs) and
   32+ base64 characters mixing cases and digits at >= 4 bits/char. Lower-case hex (commits, request
   ids) is never a secret by shape: the journal must keep commits.

Redaction is idempotent and never adds quotes or backslashes, so JSON stays JSON.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from urllib.parse import quote

__all__ = ["REDACTED", "redact", "is_secret_name", "looks_like_secret", "redact_text", "redact_mapping",
           "redact_pairs", "redact_spec_dict", "redact_obj", "Redactor"]

REDACTED = "[REDACTED]"

_CREDENTIAL_NOUNS = ("token", "key", "secret", "password", "passwd", "passphrase")
_LAST_WORDS = frozenset(_CREDENTIAL_NOUNS) | {"credential", "credentials", "authorization", "cookie", "apikey"}
_ANYWHERE = ("password", "passwd", "secret")
# Every name is_secret_name accepts holds one of these (lower case): a text without any has no secret name.
_NAME_FRAGMENTS = ("token", "key", "secret", "pass", "pwd", "credential", "authorization", "cookie")
# Words that end in a credential noun by accident.
_BENIGN_COMPOUNDS = frozenset({"monkey", "donkey", "hockey", "jockey", "turkey", "whiskey", "hotkey", "keykey"})
_WORD_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")


def _first_start(run: str, start: str) -> str:
    """A regex prefix that tries only the first place in a run of ``run`` characters where ``start`` holds.

    Without it a pattern such as ``\\beyJ[A-Za-z0-9_-]{8,}\\.`` restarts at every ``\\b`` of a long run:
    quadratic (a 60 kB line with no spaces took 33.6 s, issue 20). The patterns built on it extend to the
    run's end, so a later start fails whenever the first does. The skipped lead-in is the ``lead`` group.
    """
    return rf"(?<!{run})(?>(?P<lead>{run}*?){start})"


# Known credential formats, matched anywhere in text, each after a literal it cannot match
# without: a text without the literal skips the pattern (an `in` test, far cheaper than a scan).
_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("-----BEGIN", re.compile(r"-----BEGIN[A-Z ]*PRIVATE KEY-----.*?(?:-----END[A-Z ]*PRIVATE KEY-----|\Z)", re.S)),
    ("hf_", re.compile(r"\bhf_[A-Za-z0-9]{20,}")),
    ("sk-", re.compile(r"\bsk-[A-Za-z0-9_-]{20,}")),
    ("IA", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("_", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}")),
    ("github_pat_", re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,}")),
    ("glpat-", re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}")),
    ("xox", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("eyJ", re.compile(_first_start(r"[A-Za-z0-9_-]", r"\b(?=eyJ)")
                       + r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]+")),
)
_BEARER = re.compile(r"(?i)\b(bearer|basic)(\s+)(?!\[REDACTED\])([A-Za-z0-9._~+/=-]{8,})")
_PLAIN_WORD = re.compile(r"[A-Z]?[a-z]+|[-+]?\d+(?:\.\d+)?")
_URL_USERINFO = re.compile(r"(?i)" + _first_start(r"[a-z0-9+.-]", r"\b(?=[a-z])")
                           + r"(?P<user>[a-z][a-z0-9+.-]*://[^\s:/@'\"]+):(?:[^\s@/'\"]+)@")
# NAME=value, --flag=value, --flag value, name: value, "name": "value". Values never
# swallow quotes, backticks or backslashes, which keeps JSON valid, `code spans` closed and
# redaction idempotent.
_VALUE = r"(?:\"[^\"\\\n]*\"|'[^'\\\n]*'|(?:(?i:bearer|basic|token|digest)\s+)?[^\s'\"`\\,;&|)}\]]+)"
_ASSIGN = re.compile(r"(?<![A-Za-z0-9_.-])(?P<name>--?[A-Za-z][A-Za-z0-9_.-]*|[A-Za-z_][A-Za-z0-9_.]*)(?P<sep>=)"
                     r"(?P<value>" + _VALUE + ")")
_FLAG_SPACE = re.compile(r"(?<![A-Za-z0-9_-])(?P<name>--[A-Za-z][A-Za-z0-9_-]*)(?P<sep>\s+)(?!-)(?P<value>" + _VALUE + ")")
# A name starts after a dot too (``config.api_key: x``), but only the first start of a run is tried.
_COLON = re.compile(_first_start(r"[A-Za-z0-9_.-]", r"(?<![A-Za-z0-9_-])(?=[A-Za-z_])")
                    + r"(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)(?P<sep>[\"']?\s*:\s*[\"']?)(?!//)(?P<value>" + _VALUE + ")")
# `=` only as base64's padding at a token's end: elsewhere it joins a name and a value, and a long dull one on
# either side (`00000000000000000000000=<secret>`) must not dilute the secret's entropy below the bar.
_ENTROPY_CANDIDATE = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{32,}={0,2}(?![A-Za-z0-9+/_-])")


def _words(name: str) -> list[str]:
    return [w.lower() for w in _WORD_SPLIT.split(name.strip()) if w]


@lru_cache(maxsize=4096)  # a long line repeats the same few names thousands of times
def is_secret_name(name: str) -> bool:
    """True when a variable or flag *name* announces a credential (see the module docstring).

    >>> is_secret_name("HF_TOKEN"), is_secret_name("--max-tokens"), is_secret_name("KEY_VALUE_CACHE")
    (True, False, False)
    """
    words = _words(name)
    if not words:
        return False
    if any(fragment in word for word in words for fragment in _ANYWHERE):
        return True
    last = words[-1]
    if last in _LAST_WORDS:
        return True
    if last == "pwd":  # PWD alone is the working directory; MYSQL_PWD is a password
        return len(words) > 1
    return last not in _BENIGN_COMPOUNDS and any(
        last.endswith(noun) and len(last) > len(noun) for noun in _CREDENTIAL_NOUNS
    )


def _entropy_bits(text: str) -> float:
    # str.count per distinct character: a token has few distinct ones (it is base64 at most), and
    # counting each in C is several times faster than Counter's loop over a megabyte token.
    counts = [text.count(c) for c in set(text)]
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts)


def _is_high_entropy(token: str) -> bool:
    if len(token) < 32 or token == REDACTED:
        return False
    if not (re.search(r"[a-z]", token) and re.search(r"[A-Z]", token) and re.search(r"[0-9]", token)):
        return False
    # Paths and repository ids (moonshotai/Kimi-K2-Instruct-0905): short words between separators.
    segments = [s for s in re.split(r"[/_-]", token) if s]
    if (len(segments) >= 3 or "/" in token) and max(map(len, segments), default=0) < 20:
        return False
    return _entropy_bits(token) >= 4.0


def looks_like_secret(value: str) -> bool:
    """True when a *value* has the shape of a credential, whatever it is called.

    >>> looks_like_secret("hf_" + "a1B2c3D4e5" * 3), looks_like_secret("Ring")
    (True, False)
    """
    value = value.strip().strip("'\"")
    if not value or value == REDACTED:
        return False
    return redact_text(value) != value


def _lead(match: re.Match[str]) -> str:
    """The lead-in a pattern built with :func:`_first_start` skipped (kept as it was)."""
    return (match.group("lead") or "") if "lead" in match.re.groupindex else ""


def _named_value(match: re.Match[str]) -> str:
    name, sep, value = match.group("name", "sep", "value")
    if not is_secret_name(name) or "[REDACTED" in value:
        return match.group(0)
    # "#full token: 181" (SGLang's decode line) is a count, not a credential; a number
    # next to a password is still redacted.
    if re.fullmatch(r"[-+]?\d+(?:\.\d+)?", value) and not any(f in name.lower() for f in _ANYWHERE):
        return match.group(0)
    return f"{_lead(match)}{name}{sep}{REDACTED}"


def _bearer(match: re.Match[str]) -> str:
    # "basic attention backend" is prose; "Basic dXNlcjpwYXNz" is a credential.
    if _PLAIN_WORD.fullmatch(match.group(3)):
        return match.group(0)
    return f"{match.group(1)}{match.group(2)}{REDACTED}"


def _shape(match: re.Match[str]) -> str:
    lead = _lead(match)
    found = match.group(0)[len(lead):]
    return lead + (found if found == REDACTED else REDACTED)


def redact_text(text: str) -> str:
    """Return ``text`` with every secret replaced by ``[REDACTED]``; everything else is kept.

    >>> redact_text("HF_TOKEN=hf_abc123 NCCL_ALGO=Ring python -m sglang.launch_server --api-key s3cr3t")
    'HF_TOKEN=[REDACTED] NCCL_ALGO=Ring python -m sglang.launch_server --api-key [REDACTED]'
    """
    if not text:
        return text
    for literal, pattern in _SHAPES:
        if literal in text:
            text = pattern.sub(_shape, text)
    if "://" in text:
        text = _URL_USERINFO.sub(lambda m: f"{_lead(m)}{m.group('user')}:{REDACTED}@", text)
    folded = text.lower()  # a replacement never adds "bearer" or "basic"
    if "bearer" in folded or "basic" in folded:
        text = _BEARER.sub(_bearer, text)
    if any(fragment in folded for fragment in _NAME_FRAGMENTS):  # else no name here is a secret's
        for literal, pattern in (("=", _ASSIGN), ("--", _FLAG_SPACE), (":", _COLON)):
            if literal in text:
                text = pattern.sub(_named_value, text)
    return _ENTROPY_CANDIDATE.sub(lambda m: REDACTED if _is_high_entropy(m.group(0)) else m.group(0), text)


def redact_mapping(mapping: Mapping[str, Any]) -> dict[str, Any]:
    """Redact a ``name -> value`` mapping such as an environment (names are kept).

    >>> redact_mapping({"NCCL_ALGO": "Ring", "OPENAI_API_KEY": "abc"})
    {'NCCL_ALGO': 'Ring', 'OPENAI_API_KEY': '[REDACTED]'}
    """
    return {redact_text(str(k)): redact_obj(v, name=str(k)) for k, v in mapping.items()}


def redact_pairs(pairs: Any) -> list[list[Any]]:
    """Redact an ordered ``[[name, value], ...]`` list (a ServerSpec's flags or env)."""
    return [[str(name), redact_obj(value, name=str(name))] for name, value in pairs]


def redact_spec_dict(spec: Mapping[str, Any]) -> dict[str, Any]:
    """Redact a ``ServerSpec.to_dict()``: flag and env values by name and shape, all text by shape."""
    out: dict[str, Any] = {}
    for key, value in spec.items():
        if key in ("flags", "env") and isinstance(value, list | tuple):
            out[key] = redact_pairs(value)
        elif key == "launcher" and isinstance(value, list | tuple):
            out[key] = [redact_text(str(v)) for v in value]
        else:
            out[key] = redact_obj(value, name=key)
    return out


def _is_pair(item: Any) -> bool:
    return (isinstance(item, list | tuple) and len(item) == 2 and isinstance(item[0], str)
            and re.fullmatch(r"-{0,2}[A-Za-z_][A-Za-z0-9_.-]*", item[0]) is not None)


def _is_count(name: str, value: Any) -> bool:
    """A number named like a token is a count: SGLang's decode line ``#token: 221``
    (``f"#token: {num_used}, "`` in python/sglang/srt/managers/scheduler.py ``log_decode_stats``, SGLang
    0.4.x and 0.5.x). Beside a password it is still a secret."""
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and not any(fragment in name.lower() for fragment in _ANYWHERE))


def redact_obj(obj: Any, *, name: str | None = None) -> Any:
    """Redact any JSON-like tree: dict keys and ``[name, value]`` pairs are names, strings are text."""
    if name is not None and is_secret_name(name) and obj is not None and not _is_count(name, obj):
        return REDACTED
    if isinstance(obj, str):
        return redact_text(obj)
    if isinstance(obj, Mapping):
        # Keys are names, and text too: a benchmark's error counts are keyed by the error's message.
        return {redact_text(str(k)): redact_obj(v, name=str(k)) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        # ["HF_TOKEN", "x"] inside a list is a name/value pair (a spec's env, an evidence entry).
        return [[item[0], redact_obj(item[1], name=item[0])] if _is_pair(item) else redact_obj(item)
                for item in obj]
    return obj


def redact(data: Any) -> Any:
    """The contract's one entry point: text, a mapping, or any JSON-like tree, redacted.

    >>> redact({"HF_TOKEN": "hf_x", "note": "--api-key abc"})
    {'HF_TOKEN': '[REDACTED]', 'note': '--api-key [REDACTED]'}
    """
    return redact_obj(data)  # text by redact_text, a mapping as redact_mapping does


def _forms(value: str) -> set[str]:
    """The ways a value shows up in a line: as is, escaped in JSON, in a Python repr, percent-encoded."""
    forms = {value, json.dumps(value)[1:-1], repr(value)[1:-1], quote(value, safe="")}
    # A value that is part of the marker itself would redact the marker again: never idempotent.
    return {f for f in forms if len(f) >= 4 and f not in REDACTED}


@dataclass(frozen=True)
class Redactor:
    """:func:`redact_text` and :func:`redact_obj`, plus the literal ``values`` of one launch's secrets
    (``ServerSpec.secrets()``), removed whatever their shape; one alternation, longest first.

    >>> Redactor(frozenset({"Xk9s3cr3tpass"})).text("server_args=ServerArgs(api_key='Xk9s3cr3tpass', tp_size=8)")
    "server_args=ServerArgs(api_key='[REDACTED]', tp_size=8)"
    """

    values: frozenset[str] = frozenset()
    _pattern: re.Pattern[str] | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def of(cls, values: Iterable[str]) -> Redactor:
        return cls(frozenset(v for v in values if v))

    def __post_init__(self) -> None:
        forms = sorted({f for v in self.values for f in _forms(v)}, key=lambda f: (-len(f), f))
        pattern = re.compile("|".join(map(re.escape, forms))) if forms else None
        object.__setattr__(self, "_pattern", pattern)

    def literals(self, text: str) -> str:
        """``text`` with only the literal values replaced (for text that went through the shape rules already)."""
        return self._pattern.sub(REDACTED, text) if self._pattern is not None and text else text

    def text(self, text: str) -> str:
        """``text`` with the literal values, then every secret :func:`redact_text` finds, replaced."""
        return redact_text(self.literals(text))

    def obj(self, obj: Any) -> Any:
        """Any JSON-like tree, as :func:`redact_obj` does, with the literal values replaced in its strings."""
        if self._pattern is None:
            return redact_obj(obj)
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, Mapping):
            return redact_obj({self.text(str(k)): self.obj(v) for k, v in obj.items()})
        if isinstance(obj, list | tuple):
            return redact_obj([self.obj(item) for item in obj])
        return redact_obj(obj)

    def __call__(self, text: str) -> str:
        return self.text(text)
