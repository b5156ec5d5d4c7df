"""Sensors: what is measured around a run besides the benchmark (docs/observe.md). `prometheus`, `gpu_samples`
(pure), `telemetry` (`GpuTelemetry`), `scrape` (`MetricsScraper`); `trace`, `kernels` (pure), `torch_profile`;
`equivalence` (greedy outputs compared); `cache` (the prefix cache). `profiled` runs on the host, in the engine's
environment: it imports nothing of the toolkit, and so this file imports nothing either."""
