"""Screenshot a post-mortem's HTML in headless Chromium, section by section, as small PNGs.

    .venv/bin/python docs/screenshots/take_screenshots.py out/postmortem.html docs/screenshots/postmortem
    .venv/bin/python docs/screenshots/take_screenshots.py REPORT.html docs/screenshots/nb07 summary figure:concurrency

Sections by name (all of SECTIONS when none is named); ``figure:WORDS`` shoots the figure whose
image's alt text contains WORDS, saved as ``PREFIX-figure.png``.

Debian's chromium (apt ``chromium``) through playwright, as the browser tests drive it
(tests/system/browser.py). Each PNG is one viewport from a section heading down,
quantised to 256 colours so the files stay small. The path of the checkout that ran the
demo (its interpreter shows in the reproduce commands) reads ``<checkout>`` in the shots, so
that no path of the machine that took them is committed.
"""

from __future__ import annotations

import io
import shutil
import sys
import tempfile
from pathlib import Path

from PIL import Image
from playwright.sync_api import sync_playwright

CHECKOUT = str(Path(__file__).resolve().parents[2])
SECTIONS = {"setup": "setup", "summary": "summary", "root-cause": "root-cause", "timeline": "timeline", "results": "results",
            "decisive-lines": "decisive-log-lines", "steps": "steps", "reproduce": "how-to-reproduce-each-step"}


def _save(png_bytes: bytes, target: Path) -> None:
    png = Image.open(io.BytesIO(png_bytes)).convert("RGB").quantize(256)
    target.parent.mkdir(parents=True, exist_ok=True)
    png.save(target, optimize=True)
    print(f"{target} ({target.stat().st_size // 1024} KiB)")


def main(html: Path, prefix: str, names: list[str]) -> None:
    unknown = [n for n in names if n not in SECTIONS and not n.startswith("figure:")]
    if unknown:
        raise SystemExit(f"unknown section(s) {', '.join(unknown)}: name some of {', '.join(SECTIONS)} or figure:WORDS")
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            profile, executable_path=chromium, headless=True, viewport={"width": 1150, "height": 820},
            args=["--no-sandbox", "--disable-gpu", "--no-first-run"])
        page = browser.new_page()
        page.goto(html.resolve().as_uri())
        page.evaluate("""checkout => { const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
            while (walk.nextNode()) walk.currentNode.nodeValue = walk.currentNode.nodeValue.split(checkout).join("<checkout>"); }""",
                      CHECKOUT)
        for name in names or list(SECTIONS):
            if name.startswith("figure:"):
                figure = page.locator("figure", has=page.locator(f"img[alt*={name.removeprefix('figure:')!r}]"))
                _save(figure.first.screenshot(), Path(f"{prefix}-figure.png"))
                continue
            page.evaluate(f"document.getElementById({SECTIONS[name]!r}).scrollIntoView()")
            _save(page.screenshot(), Path(f"{prefix}-{name}.png"))
        browser.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2], sys.argv[3:])
