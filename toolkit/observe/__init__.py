"""Sensors: what is measured around a run besides the benchmark (docs/observe.md). `prometheus` and
`gpu_samples` (pure), `telemetry` (`GpuTelemetry`), `scrape` (`MetricsScraper`)."""
