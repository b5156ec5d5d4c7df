"""vLLM's `/metrics` page (Prometheus text format 0.0.4) from the engine's counters. Pure."""

from __future__ import annotations

from toolkit.sim.engine import Totals

__all__ = ["render_vllm_metrics", "family"]


def family(name: str, kind: str, help_text: str, samples: list[tuple[dict[str, str], float]]) -> list[str]:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    for labels, value in samples:
        label_text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        lines.append(f"{name}{{{label_text}}} {float(value)}")
    return lines


def render_vllm_metrics(totals: Totals, model_name: str, running: int, waiting: int, kv_usage: float,
                        speculative: bool) -> str:
    """The counters a benchmark or a notebook reads: tokens, requests, speculative acceptance."""
    base = {"engine": "0", "model_name": model_name}
    out: list[str] = []
    out += family("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
                   [(base, running)])
    out += family("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
                   [(base, waiting)])
    out += family("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.",
                   [(base, kv_usage)])
    out += family("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.",
                   [(base, totals.prompt_tokens)])
    out += family("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.",
                   [(base, totals.generation_tokens)])
    out += family("vllm:request_success_total", "counter", "Count of successfully processed requests.",
                   [({**base, "finished_reason": "length"}, totals.requests_finished)])
    if speculative:
        out += family("vllm:spec_decode_num_drafts_total", "counter", "Number of spec decoding drafts.",
                       [(base, totals.spec_forward_ct)])
        out += family("vllm:spec_decode_num_draft_tokens_total", "counter", "Number of draft tokens.",
                       [(base, totals.spec_drafted_tokens)])
        out += family("vllm:spec_decode_num_accepted_tokens_total", "counter", "Number of accepted tokens.",
                       [(base, totals.spec_accepted_drafts)])
        out += family("vllm:spec_decode_num_accepted_tokens_per_pos_total", "counter",
                       "Accepted tokens per draft position.",
                       [({**base, "position": str(i)}, n) for i, n in enumerate(totals.spec_accepted_per_pos)])
    return "\n".join(out) + "\n"
