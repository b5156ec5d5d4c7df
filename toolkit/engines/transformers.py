"""``transformers serve`` 5.24: a small profile, read in the released wheel (transformers/cli/serving/).

One process; ``--continuous-batching`` runs the batches in a *thread*. When it dies the server keeps
answering: ``/health`` 503 ``{"status": "unhealthy", "reason": "cb_worker_dead"}``, every request 503
``{"error": "CB worker is dead ..."}`` (issue 13's H200 run: 503 for 300 s, called a timeout).
No ``/metrics``, no server info, no API key.
"""

from __future__ import annotations

from toolkit.engines.release_profile import EngineProfile, HealthAnswer, HealthCheck
from toolkit.engines.versions import ReleaseRange

__all__ = ["TRANSFORMERS_PROFILES"]

_SERVER = "transformers/cli/serving/server.py"
_UTILS = "transformers/cli/serving/utils.py"

_V524 = EngineProfile(
    engine="transformers", name="transformers-5.24+", releases=ReleaseRange("5.24.0", None),
    start_method="threads",
    start_method_source=("transformers 5.24.0 transformers/generation/continuous_batching/continuous_api.py:1150 "
                         "(the batching loop runs in a thread of the server process; its error is logged "
                         "'Error in generation loop: ...')"),
    env_writes=(),
    health=(
        HealthCheck(
            "/health", "GET", False, 0.0, f"transformers 5.24.0 {_SERVER}:150-154", None, 503,
            ("the continuous-batching worker died (GenerationState.is_cb_alive() is False)",),
            body='JSON {"status": "ok"} or {"status": "unhealthy", "reason": "cb_worker_dead"}',
            answers=(
                HealthAnswer(200, "ready", f"transformers 5.24.0 {_SERVER}:154", body='{"status": "ok"}'),
                HealthAnswer(503, "dead", f"transformers 5.24.0 {_SERVER}:152-153",
                             body='{"status": "unhealthy", "reason": "cb_worker_dead"}', reason_field="reason"),
            ),
        ),
    ),
    ready_log_line="Application startup complete.",
    ready_log_source=("uvicorn, started by transformers 5.24.0 transformers/cli/serve.py:221-227 (the model named "
                      "on the command line is loaded before the port opens)"),
    models_path="/v1/models", metrics_path=None, metrics=None, flush_cache=None, start_profile=None,
    stop_profile=None, api_key_flag=None, api_key_env=None, api_key_guarded=(), api_key_open=(),
    api_key_source=f"transformers 5.24.0 {_SERVER}:45-154 (no authentication middleware)",
    version_command="python -c \"import importlib.metadata as m; print(m.version('transformers'))\"",
    version_source="transformers 5.24.0 transformers/__init__.py:21 (__version__; importlib.metadata reads the same)",
    flag_releases=("5.24.0",),
    notes=(
        f"a request to a dead batching worker: 503 {{'error': 'CB worker is dead and cannot accept request ID: "
        f"ERROR'}} (transformers 5.24.0 {_SERVER}:78-81, {_UTILS}:949-958)",
        "routes: /v1/chat/completions, /v1/completions, /v1/responses, /v1/systemone, /v1/audio/transcriptions, "
        f"/load_model, /reset, /v1/models, /health (transformers 5.24.0 {_SERVER}:106-154); no /metrics",
    ),
)

TRANSFORMERS_PROFILES: tuple[EngineProfile, ...] = (_V524,)
