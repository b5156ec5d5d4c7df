"""GPU telemetry as data: nvidia-smi CSV lines and DCGM exporter pages -> :class:`GpuSample`. Pure.

nvidia-smi stamps its lines with the *host's* local time without a zone (``2026/12/01 10:00:00.123``):
:class:`HostClock` maps them onto this machine's epoch, zone and skew included, from one ``date`` on the host.

>>> clock = HostClock(offset_s=0.0)
>>> s = parse_nvidia_smi_line("2026/12/01 10:00:00.500, 0, NVIDIA H200, 87, 41, 120000, 143771, 1980, 612.30, 55",
...                           clock)
>>> s.gpu, s.util_pct, s.power_w, s.simulated
('GPU0', 87.0, 612.3, False)
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from toolkit.logs import MetricRow
from toolkit.prometheus_text import PromSample

__all__ = ["GpuSample", "HostClock", "NVIDIA_SMI_FIELDS", "nvidia_smi_command", "parse_nvidia_smi_line",
           "dcgm_samples", "SIMULATED_MARK", "HOST_DATE_COMMAND"]

NVIDIA_SMI_FIELDS = ("timestamp", "index", "name", "utilization.gpu", "utilization.memory", "memory.used",
                     "memory.total", "clocks.sm", "power.draw", "temperature.gpu")
"""What is sampled, in nvidia-smi's own names (``nvidia-smi --help-query-gpu``)."""

SIMULATED_MARK = "toolkit.sim"
"""A GPU whose name holds this is the simulator's stand-in; its samples say ``simulated``."""

HOST_DATE_COMMAND = "date '+%Y/%m/%d %H:%M:%S.%N'"
"""The host's local time in nvidia-smi's stamp format (nanoseconds; parsed to microseconds)."""

_STAMP = "%Y/%m/%d %H:%M:%S.%f"


def nvidia_smi_command(interval_ms: int) -> str:
    """The sampling command: one CSV line per GPU every ``interval_ms`` (nvidia-smi's ``-lms``)."""
    if interval_ms < 1:
        raise ValueError(f"interval_ms must be >= 1, got {interval_ms}")
    return f"nvidia-smi --query-gpu={','.join(NVIDIA_SMI_FIELDS)} --format=csv,noheader,nounits -lms {int(interval_ms)}"


def _naive_epoch(text: str) -> float:
    """A zone-less stamp read as if UTC (the zone is folded into HostClock's offset)."""
    head, _, fraction = text.strip().partition(".")
    stamp = f"{head}.{(fraction + '000000')[:6]}"
    return datetime.strptime(stamp, _STAMP).replace(tzinfo=UTC).timestamp()


@dataclass(frozen=True)
class HostClock:
    """Maps the host's zone-less local stamps onto this machine's epoch seconds.

    ``offset_s`` = our epoch minus the host stamp read as UTC: the host's zone and its skew from ours,
    to within half the round trip of the ``date`` that measured it.
    """

    offset_s: float

    @classmethod
    def measure(cls, host_date: str, sent_at: float, received_at: float) -> HostClock:
        """From ``HOST_DATE_COMMAND``'s output and our clock just before and after it ran."""
        return cls((sent_at + received_at) / 2.0 - _naive_epoch(host_date))

    def epoch(self, host_stamp: str) -> float:
        return _naive_epoch(host_stamp) + self.offset_s


@dataclass(frozen=True)
class GpuSample:
    """One GPU at one moment. None: the GPU does not report it (``[N/A]``, ``[Not Supported]``)."""

    timestamp: float  # epoch seconds on this machine's clock
    gpu: str  # "GPU0"
    name: str
    util_pct: float | None
    mem_util_pct: float | None
    mem_used_mib: float | None
    mem_total_mib: float | None
    sm_clock_mhz: float | None
    power_w: float | None
    temperature_c: float | None
    source: str = "nvidia-smi"

    @property
    def simulated(self) -> bool:
        return SIMULATED_MARK in self.name or self.source == "simulated"

    def metric_row(self) -> MetricRow:
        """The journal's form: kind ``gpu``, rank ``GPU0``, values without the missing ones."""
        values: dict[str, float | bool] = {key: value for key, value in (
            ("gpu_util_pct", self.util_pct), ("mem_util_pct", self.mem_util_pct),
            ("mem_used_mib", self.mem_used_mib), ("mem_total_mib", self.mem_total_mib),
            ("sm_clock_mhz", self.sm_clock_mhz), ("power_w", self.power_w),
            ("temperature_c", self.temperature_c)) if value is not None}
        values["simulated"] = self.simulated
        return MetricRow("gpu", values, datetime.fromtimestamp(self.timestamp), self.gpu, 0)


def _float(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:  # "", "[N/A]", "[Not Supported]"
        return None
    return value if math.isfinite(value) else None


def parse_nvidia_smi_line(line: str, clock: HostClock, source: str = "nvidia-smi") -> GpuSample | None:
    """One line of ``nvidia_smi_command`` output, or None for anything else (a header, an error line).

    The fields around the GPU name are counted from both ends, in case the name holds commas.
    """
    parts = [p.strip() for p in line.strip().split(",")]
    if len(parts) < len(NVIDIA_SMI_FIELDS):
        return None
    head, tail = parts[:2], parts[-7:]
    name = ", ".join(parts[2:-7])
    try:
        timestamp = clock.epoch(head[0])
        index = int(head[1])
    except ValueError:
        return None
    util, mem_util, used, total, sm_clock, power, temperature = (_float(t) for t in tail)
    return GpuSample(timestamp, f"GPU{index}", name, util, mem_util, used, total, sm_clock, power, temperature, source)


_DCGM = {"DCGM_FI_DEV_GPU_UTIL": "util", "DCGM_FI_DEV_MEM_COPY_UTIL": "mem_util", "DCGM_FI_DEV_FB_USED": "used",
         "DCGM_FI_DEV_FB_FREE": "free", "DCGM_FI_DEV_SM_CLOCK": "sm", "DCGM_FI_DEV_POWER_USAGE": "power",
         "DCGM_FI_DEV_GPU_TEMP": "temp"}


def dcgm_samples(samples: Iterable[PromSample], at: float) -> list[GpuSample]:
    """GPU samples from one DCGM exporter scrape (dcgm-exporter's default counters), one per ``gpu`` label."""
    per_gpu: dict[str, dict[str, float]] = {}
    names: dict[str, str] = {}
    for sample in samples:
        key = _DCGM.get(sample.name)
        gpu = sample.labels.get("gpu")
        if key is None or gpu is None:
            continue
        per_gpu.setdefault(gpu, {})[key] = sample.value
        names[gpu] = sample.labels.get("modelName", "GPU")
    out = []
    for gpu in sorted(per_gpu, key=lambda g: (len(g), g)):
        v = per_gpu[gpu]
        used, free = v.get("used"), v.get("free")
        total = used + free if used is not None and free is not None else None
        out.append(GpuSample(at, f"GPU{gpu}", names[gpu], v.get("util"), v.get("mem_util"), used, total,
                             v.get("sm"), v.get("power"), v.get("temp"), source="dcgm"))
    return out
