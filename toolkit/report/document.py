"""A tiny document model rendered twice: Markdown beside PNG files, and one self-contained HTML file.

Not Markdown -> HTML through a library: Python-Markdown passes raw HTML through, and a post-mortem
quotes lines that may hold ``<script>``. Every text is redacted again in the renderers.
"""

from __future__ import annotations

import base64
import html
import io
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from toolkit.logs.inert import inert_text
from toolkit.redaction import redact_text

__all__ = ["Heading", "Paragraph", "Bullets", "Table", "Code", "Figure", "Block", "figure", "cell", "num",
           "to_markdown", "to_html"]


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 2


@dataclass(frozen=True)
class Paragraph:
    text: str
    emphasis: bool = False


@dataclass(frozen=True)
class Bullets:
    items: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Code:
    text: str
    language: str = ""


@dataclass(frozen=True)
class Figure:
    """A PNG written beside the Markdown as ``filename`` and embedded in the HTML."""

    filename: str
    alt: str
    png: bytes


Block = Heading | Paragraph | Bullets | Table | Code | Figure


def figure(fig: Any, name: str, alt: str, dpi: int) -> Figure:
    """A matplotlib figure as the block ``name.png``."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return Figure(f"{name}.png", alt, buffer.getvalue())


def cell(value: Any) -> str:
    """``value`` as a cell shows it: "" for None, NaN and pandas' NA and NaT."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or repr(value) in ("<NA>", "NaT"):
        return ""
    return str(value)


def num(value: Any, digits: int = 1) -> str:
    return "" if cell(value) == "" else f"{float(value):.{digits}f}"


def _clean(text: str) -> str:
    """Redacted, and inert: escapes, control and direction characters shown, not obeyed (issue 25)."""
    return inert_text(redact_text(text))


_MD_SPECIAL = re.compile(r"([\\`*\[\]<>|])")
_CODE_SPAN = re.compile(r"`([^`\n]+)`")


def _md(text: str, *, in_table: bool = False) -> str:
    """Escape inline Markdown so that quoted text stays text (``<script>`` shows as written).

    Only `code spans` survive as Markdown: users write flags that way in notes.
    """
    text = " ".join(_clean(text).split())
    pieces = _CODE_SPAN.split(text)  # even indexes: prose; odd: code span contents
    return "".join((f"`{p.replace('|', chr(92) + '|')}`" if in_table else f"`{p}`") if i % 2
                   else _MD_SPECIAL.sub(r"\\\1", p) for i, p in enumerate(pieces))


def to_markdown(blocks: Sequence[Block]) -> str:
    """GitHub-flavoured Markdown; figures are referenced by file name (written beside it)."""
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f"{'#' * block.level} {_md(block.text)}")
        elif isinstance(block, Paragraph):
            text = _md(block.text)
            text = "\\" + text if text.startswith(("#", "-", "+", "=")) else text
            out.append(f"*{text}*" if block.emphasis else text)
        elif isinstance(block, Bullets):
            out.append("\n".join(f"- {_md(item)}" for item in block.items))
        elif isinstance(block, Table):
            lines = ["| " + " | ".join(_md(c, in_table=True) for c in block.columns) + " |",
                     "|" + "|".join(" --- " for _ in block.columns) + "|"]
            lines += ["| " + " | ".join(_md(cell, in_table=True) or " " for cell in row) + " |" for row in block.rows]
            out.append("\n".join(lines))
        elif isinstance(block, Code):
            text = _clean(block.text)
            fence = "`" * max(3, max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
            out.append(f"{fence}{block.language}\n{text}\n{fence}")
        else:
            out.append(f"![{_md(block.alt)}]({block.filename})")
    return "\n\n".join(out) + "\n"


_CSS = """
body { font: 15px/1.5 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #212121;
       max-width: 1100px; margin: 2em auto; padding: 0 1.5em; }
h1 { border-bottom: 2px solid #e0e0e0; padding-bottom: .3em; }
h2 { border-bottom: 1px solid #eeeeee; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: 1em 0; font-size: 13px; }
th, td { border: 1px solid #e0e0e0; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f5f5f5; }
tr:nth-child(even) td { background: #fafafa; }
pre { background: #f6f8fa; border: 1px solid #e0e0e0; padding: .8em; font-size: 12.5px;
      white-space: pre-wrap; overflow-wrap: anywhere; }  /* notes and tracebacks wrap: nothing hidden off the right */
code { font-family: SFMono-Regular, Consolas, "Liberation Mono", monospace; }
img { max-width: 100%; border: 1px solid #eeeeee; margin: .5em 0; }
.verdict-confirmed { color: #2e7d32; font-weight: 600; } .verdict-refuted { color: #757575; font-weight: 600; }
.verdict-inconclusive { color: #e69500; font-weight: 600; } .status-failed { color: #c62828; font-weight: 600; }
.status-interrupted { color: #8e24aa; font-weight: 600; }
"""

_CLASSES = {"confirmed": "verdict-confirmed", "refuted": "verdict-refuted", "inconclusive": "verdict-inconclusive",
            "failed": "status-failed", "interrupted": "status-interrupted"}


def _h(text: str) -> str:
    return html.escape(_clean(text), quote=True)


def _h_inline(text: str) -> str:
    """Escaped text where `code spans` become <code> (the same rule as the Markdown side)."""
    pieces = _CODE_SPAN.split(_clean(text))
    return "".join(f"<code>{html.escape(p)}</code>" if i % 2 else html.escape(p) for i, p in enumerate(pieces))


def _cell(text: str, tag: str) -> str:
    css = _CLASSES.get(text.strip())
    return f'<{tag} class="{css}">{_h(text)}</{tag}>' if css else f"<{tag}>{_h(text)}</{tag}>"


def to_html(blocks: Sequence[Block], *, title: str) -> str:
    """One HTML file with inline CSS and base64 PNGs: no external assets, opens anywhere."""
    body: list[str] = []
    used: Counter[str] = Counter()
    for block in blocks:
        if isinstance(block, Heading):
            level = min(max(block.level, 1), 6)
            anchor = re.sub(r"[^a-z0-9]+", "-", _clean(block.text).lower()).strip("-") or "section"
            used[anchor] += 1
            anchor = anchor if used[anchor] == 1 else f"{anchor}-{used[anchor]}"  # ids stay unique
            body.append(f'<h{level} id="{anchor}">{_h(block.text)}</h{level}>')
        elif isinstance(block, Paragraph):
            text = _h_inline(block.text)
            body.append(f"<p><em>{text}</em></p>" if block.emphasis else f"<p>{text}</p>")
        elif isinstance(block, Bullets):
            body.append("<ul>" + "".join(f"<li>{_h_inline(item)}</li>" for item in block.items) + "</ul>")
        elif isinstance(block, Table):
            head = "".join(_cell(c, "th") for c in block.columns)
            rows = "".join("<tr>" + "".join(_cell(c, "td") for c in row) + "</tr>" for row in block.rows)
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif isinstance(block, Code):
            body.append(f"<pre><code>{_h(block.text)}</code></pre>")
        else:
            data = base64.b64encode(block.png).decode("ascii")
            body.append(f'<figure><img alt="{_h(block.alt)}" src="data:image/png;base64,{data}"></figure>')
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{_h(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")
