"""Sensors: what is measured around a run besides the benchmark (docs/observe.md). `prometheus` and
`gpu_samples` (pure), `telemetry` (`GpuTelemetry`), `scrape` (`MetricsScraper`); `trace` and `kernels`
(pure), `torch_profile`, and `profiled` (run on the host, it imports nothing of the toolkit); `equivalence`."""
