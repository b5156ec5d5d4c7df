"""The post-mortem: Markdown + PNGs and a self-contained HTML, complete, escaped and redacted."""

from __future__ import annotations

import base64
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import matplotlib
import pytest
from journal_data import bench_result
from test_journal_story import SECRET_TOKEN, build_story

from toolkit.__main__ import main as toolkit_main
from toolkit.host.host import Host
from toolkit.journal import Journal
from toolkit.moves.bisect.checkout import GitCheckout
from toolkit.report import comparisons
from toolkit.report import postmortem as report
from toolkit.report.document import Block, Code, Paragraph, Table, to_html, to_markdown
from toolkit.server.spec import ServerSpec

matplotlib.use("Agg")


class _Page(HTMLParser):
    """Collects text, tags and image sources; fails on nothing (html.parser is lenient), so we check."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.tags: list[str] = []
        self.images: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        values = dict(attrs)
        if tag == "img":
            self.images.append(values.get("src") or "")
        for name in ("href", "src"):
            if tag in ("a", "link", "script") and values.get(name):
                self.links.append(values[name] or "")

    def handle_data(self, data: str) -> None:
        self.text.append(data)


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Journal, report.ReportPaths]:
    root = tmp_path_factory.mktemp("report")
    journal = build_story(root / "eagle3.sqlite")
    return journal, report.write(journal, root / "out")


def test_html_parses_and_holds_every_step_title(written: tuple[Journal, report.ReportPaths]) -> None:
    journal, paths = written
    page = _Page()
    page.feed(paths.html.read_text(encoding="utf-8"))
    page.close()
    text = "".join(page.text)
    for title in journal.steps()["title"]:
        assert title in text
    for heading in ("Summary", "Timeline", "Results", "Decisive log lines", "Root cause", "How to reproduce"):
        assert heading in text
    assert "--speculative-attention-mode decode" in text
    assert "27% slower than the baseline (0.73x, 95 % CI 0." in text and "x), beyond run-to-run noise" in text
    assert "Setup" in text and "Toolkit: " in text and "Every benchmark ran the same workload: " in text
    assert "script" not in page.tags  # the log line's <script> is text, not a tag
    assert "<script>alert(1)</script>" in text
    assert page.links == []  # self-contained: no external assets
    assert len(page.images) == len(paths.figures) >= 5
    for src in page.images:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:4] == b"\x89PNG"


def test_markdown_links_pngs_written_beside_it(written: tuple[Journal, report.ReportPaths]) -> None:
    _, paths = written
    markdown = paths.markdown.read_text(encoding="utf-8")
    for figure in paths.figures:
        assert figure.parent == paths.markdown.parent and figure.stat().st_size > 5_000
        assert f"]({figure.name})" in markdown
    assert "## How to reproduce each step" in markdown
    assert (
        "    --speculative-algorithm EAGLE3 \\\n    --speculative-num-steps 2 \\\n    --speculative-attention-mode decode"
        in markdown
    )
    # a benign line is counted under the step, never quoted among the decisive lines
    assert "[2026-02-26 20:26:06 TP5] Ignore import error" not in markdown.split("## Decisive log lines")[1]
    assert "judged benign (sglang_ignore_import_error" in markdown
    assert "| #8 | attention_mode | decode-mode verify |" in markdown


def test_no_output_file_holds_a_secret(written: tuple[Journal, report.ReportPaths]) -> None:
    _, paths = written
    for file in [paths.markdown, paths.html, *paths.figures]:
        assert SECRET_TOKEN.encode() not in file.read_bytes()
    assert "HF_TOKEN=[REDACTED]" in paths.markdown.read_text(encoding="utf-8")


def test_renderers_redact_and_escape_whatever_they_are_given() -> None:
    blocks: list[Block] = [
        Paragraph(f"token={SECRET_TOKEN} <b>bold</b> `--api-key x`"),
        Table(("a|b",), (("<i>",),)),
        Code(f"HF_TOKEN={SECRET_TOKEN}\n<script>"),
    ]
    html, markdown = to_html(blocks, title="t"), to_markdown(blocks)
    assert SECRET_TOKEN not in html and SECRET_TOKEN not in markdown
    assert "&lt;b&gt;bold&lt;/b&gt;" in html and "<code>--api-key [REDACTED]</code>" in html
    assert "&lt;script&gt;" in html and "| a\\|b |" in markdown


def test_cli_writes_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    journal = Journal(tmp_path / "small.sqlite", investigation="small")
    with journal.step("baseline", "only step") as step:
        step.record(bench_result(82.0))
    journal.close()
    # Through the real dispatcher (python -m toolkit report ...), in-process to keep the test quick.
    assert toolkit_main(["report", str(journal.path), "--out", str(tmp_path / "out")]) == 0
    assert "postmortem.html" in capsys.readouterr().out
    assert "only step" in (tmp_path / "out" / "postmortem.html").read_text(encoding="utf-8")


def test_cli_explains_a_missing_journal_or_investigation(
    tmp_path: Path, written: tuple[Journal, report.ReportPaths], capsys: pytest.CaptureFixture[str]
) -> None:
    assert report.main([str(tmp_path / "nope.sqlite"), "--out", str(tmp_path)]) == 2
    assert "no journal at" in capsys.readouterr().err
    journal, _ = written
    assert report.main([str(journal.path), "--out", str(tmp_path), "--investigation", "other"]) == 2
    assert "EAGLE-3 regression on Kimi-K2.5" in capsys.readouterr().err


def test_an_empty_journal_still_reports(tmp_path: Path) -> None:
    paths = report.write(Journal(tmp_path / "empty.sqlite"), tmp_path / "out")
    html = paths.html.read_text(encoding="utf-8")
    assert "No benchmark runs were recorded." in html and "Not recorded yet" in html


def test_html_ids_are_unique(written: tuple[Journal, report.ReportPaths]) -> None:
    import re

    _, paths = written
    ids = re.findall(r' id="([^"]+)"', paths.html.read_text(encoding="utf-8"))
    assert len(ids) == len(set(ids)) > 10


def test_one_run_per_side_is_not_called_within_noise() -> None:
    """A single run has no spread: the report says the noise is unknown, not that a 28% drop is noise."""
    import pandas as pd

    results = pd.DataFrame({
        "run_id": [1, 2, 3, 4], "label": ["baseline", "eagle", "decode", "decode"],
        "seq": [1, 2, 3, 3],
        "output_throughput": [81.0, 58.3, 117.4, 117.6],
    })
    rows = {row["label"]: row for row in comparisons.configurations(results, "baseline")}
    assert rows["eagle"]["verdict"] == "unknown: ran once"
    assert rows["decode"]["verdict"] == "unknown: the baseline ran once"
    assert rows["eagle"]["ratio"] == pytest.approx(58.3 / 81.0)


# A token with no known shape: only the journal's clone_url keeps it out (redaction would not know it).
_FAKE_TOKEN = "fake0token0for0tests"


def _git_repo(path: Path, origin: str | None) -> str:
    """A real checkout with one commit (and an origin remote when given); returns the commit."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True, text=True).stdout

    path.mkdir()
    git("init", "-q")
    (path / "README").write_text("the engine's source\n")
    git("add", "README")
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "first")
    if origin is not None:
        git("remote", "add", "origin", origin)
    return git("rev-parse", "HEAD").strip()


def test_a_commit_step_is_reproduced_from_the_checkout_it_came_from(tmp_path: Path) -> None:
    cloned = tmp_path / "sglang-src"
    sha = _git_repo(cloned, f"https://ci-bot:{_FAKE_TOKEN}@git.example.com/team/sglang.git")
    local = tmp_path / "no-origin"
    local_sha = _git_repo(local, None)
    journal = Journal(tmp_path / "j.sqlite", investigation="commits")
    for repo_dir, commit in ((cloned, sha), (local, local_sha)):
        source = GitCheckout(Host.local(), str(repo_dir)).source_repo()
        # as compare_commits records it: the spec points at a temporary worktree of the commit
        spec = ServerSpec.sglang("m").with_source("/tmp/toolkit-worktree-Ab12Cd", commit=commit)
        with journal.step("commit", f"commit {commit[:8]}", spec=spec, repo=source):
            pass
    with journal.step("commit", "recorded before checkouts were", spec=spec):  # what a schema-1 journal holds
        pass
    steps = journal.steps()
    assert steps["repo_origin"].fillna("").tolist() == ["https://git.example.com/team/sglang.git", "", ""]
    assert steps["repo_dir"].fillna("").tolist() == [str(cloned), str(local), ""]
    paths = report.write(journal, tmp_path / "out")
    markdown = paths.markdown.read_text(encoding="utf-8")
    assert ("git clone https://git.example.com/team/sglang.git sglang\n"
            f'REPO="$PWD/sglang"\ngit -C "$REPO" checkout {sha}\n') in markdown
    assert f'REPO={local}\ngit -C "$REPO" checkout {local_sha}\n' in markdown
    assert markdown.count("REPO=/path/to/your/checkout") == 1 and "toolkit-worktree" not in markdown
    for closed in (False, True):  # while open the rows sit in the -wal file; after closing, in the main file
        if closed:
            journal.close()
        for file in [*tmp_path.glob("j.sqlite*"), *(tmp_path / "out").iterdir()]:
            data = file.read_bytes()
            assert _FAKE_TOKEN.encode() not in data and b"ci-bot" not in data, file.name


def test_a_gap_under_one_percent_beyond_noise_is_not_called_the_same():
    from toolkit.report.summary import _against_baseline

    said = _against_baseline({"ratio": 1.002, "ratio_ci": (1.001, 1.003), "runs": 2, "verdict_code": "beyond_noise"})
    assert said.startswith("0.2% faster than the baseline") and "beyond run-to-run noise" in said
    assert _against_baseline({"ratio": 1.0001, "runs": 2, "verdict_code": "within_noise"}).startswith(
        "the same as the baseline")
    # a gap under 0.1 % that a tight interval still tells from noise (demo, second run): not "the same"
    tiny = _against_baseline({"ratio": 0.9996, "ratio_ci": (0.9995, 0.9997), "runs": 2, "verdict_code": "a_faster",
                              "small": True})
    assert tiny.startswith("under 0.1% slower than the baseline") and tiny.endswith("too small to matter"), tiny
    small = _against_baseline({"ratio": 1.002, "ratio_ci": (1.001, 1.003), "runs": 2, "verdict_code": "b_faster",
                               "small": True})
    assert small.startswith("0.2% faster than the baseline") and small.endswith("beyond run-to-run noise but under 1%: "
                                                                                "too small to matter")
