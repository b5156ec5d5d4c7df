"""The post-mortem's summary: plain sentences with this investigation's numbers, each with its certainty.

Pure. Every figure comes with its workload and its interval (issue 28).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from toolkit.report.comparisons import Curve
from toolkit.report.document import Block, Bullets, Heading, Paragraph, num
from toolkit.stats import MIN_EFFECT

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["runs_text", "summary"]


def runs_text(n: int) -> str:
    """``one run``, ``3 runs``."""
    return "one run" if n == 1 else f"{n} runs"


def _measured(config: dict[str, Any]) -> str:
    """``58.2 ± 1.1 output tok/s (95 % CI over 2 runs, 6 requests)``: the number with its certainty."""
    interval = f" ± {num(config['ci'])}" if config.get("ci") is not None else ""
    requests = f", {config['requests']} requests" if config.get("requests") else ""
    over = f"95 % CI over {runs_text(config['runs'])}" if interval else runs_text(config["runs"])
    return f"{num(config['mean'])}{interval} output tok/s ({over}{requests})"


def _against_baseline(config: dict[str, Any]) -> str:
    """``27% slower than the baseline (0.73x, 95 % CI 0.71-0.75x)``, with what the noise allows one to say."""
    ratio = float(config["ratio"])
    gap, way = abs(ratio - 1), "faster" if ratio > 1 else "slower"
    # under 1 %, to a tenth; under a tenth, "the same" only where the noise allows it: it would contradict "beyond noise"
    noise_allows = config.get("single") or config.get("verdict_code") == "within_noise" or ratio == 1
    size = (f"{gap:.0%} {way} than the baseline" if round(gap, 2) else
            f"{gap:.1%} {way} than the baseline" if round(gap, 3) else
            "the same as the baseline" if noise_allows else f"under 0.1% {way} than the baseline")
    low, high = config.get("ratio_ci") or (None, None)
    size += f" ({ratio:.2f}x, 95 % CI {low:.2f}-{high:.2f}x)" if low is not None else f" ({ratio:.2f}x)"
    if config.get("single"):
        single = "this configuration ran once" if config["runs"] == 1 else "the baseline ran once"
        return f"{size}; {single}, so the run-to-run spread is not known"
    if config.get("verdict_code") == "within_noise":
        return f"{size} on average, but within run-to-run noise: not a difference to rely on"
    if config.get("small"):
        return f"{size}, beyond run-to-run noise but under {MIN_EFFECT:.0%}: too small to matter"
    return f"{size}, beyond run-to-run noise"


def summary(name: str, steps: pd.DataFrame, configs: list[dict[str, Any]], baseline: str | None,
             root_cause: str | None, found: list[Curve]) -> list[Block]:
    """Plain sentences with this run's numbers, each with its workload and interval; the root cause as recorded."""
    counts = steps["verdict"].value_counts().to_dict() if len(steps) else {}
    failed = int((steps["status"] == "failed").sum()) if len(steps) else 0
    judged = ", ".join(f"{counts[v]} {v}" for v in ("confirmed", "refuted", "inconclusive") if counts.get(v))
    sentences = [f"The investigation \u201c{name}\u201d took {len(steps)} steps"
                 + (f"; verdicts: {judged}" if judged else "")
                 + (f"; {failed} {'step' if failed == 1 else 'steps'} failed" if failed else "") + "."]
    if configs and not any(c["varying_text"] for c in configs):
        sentences.append(f"Every benchmark ran the same workload: {configs[0]['workload_text']}.")
    compared = {str(c["workload"]) for c in configs if c.get("ratio") is not None}
    on_curve = {curve.label for curve in found}
    for base in (c for c in configs if c["is_baseline"] and (str(c["workload"]) in compared or (
            c["label"] not in on_curve and not compared))):
        at = f" at {base['varying_text']}" if base["varying_text"] else ""
        sentences.append(f"The baseline, \u201c{baseline}\u201d, gave {_measured(base)}{at}.")
    bullets = [f"\u201c{c['name']}\u201d" + (f" (on top of {c['on_top_of']})" if c.get("on_top_of") else "")
               + f" gave {_measured(c)}: {_against_baseline(c)}." for c in configs if c.get("ratio") is not None]
    bullets += [curve.sentence() for curve in found]
    alone = [c["name"] for c in configs if c.get("no_baseline") and not any(c["label"] == k.label for k in found)]
    if alone:
        bullets.append("Not compared with the baseline, which never ran their workload: "
                       + ", ".join(f"\u201c{n}\u201d" for n in alone) + " (see the results table).")
    blocks: list[Block] = [Heading("Summary"), Paragraph(" ".join(sentences))]
    if bullets:
        blocks.append(Bullets(tuple(bullets)))
    missing = "Not recorded yet (journal.root_cause(...) records it, in the investigator's words)."
    blocks += [Heading("Root cause"), Paragraph(root_cause or missing, not root_cause)]
    return blocks
