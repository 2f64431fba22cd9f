"""A fake pynvml seeded from a dict: implements just the functions tools.gpu_inventory calls."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any


class NVMLError(Exception):
    pass


class FakeNvml:
    """``FakeNvml({"driver": "550.54.15", "cuda": 12040, "gpus": [{"name": ..., "capability": (9, 0),
    "total_mib": 81559, "used_mib": 10, "util": 0, "procs": [(pid, used_mib)]}]})``; ``{"error": "msg"}``
    makes nvmlInit fail like a machine without the library."""

    NVMLError = NVMLError

    def __init__(self, seed: dict[str, Any]) -> None:
        self.seed = seed
        self.initialised = 0
        self.readings: dict[int, int] = {}

    def nvmlInit(self) -> None:
        if "error" in self.seed:
            raise NVMLError(self.seed["error"])
        self.initialised += 1

    def nvmlShutdown(self) -> None:
        self.initialised -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.seed.get("driver", "550.54.15")

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return int(self.seed.get("cuda", 12040))

    def nvmlDeviceGetCount(self) -> int:
        return len(self.seed.get("gpus", []))

    def nvmlDeviceGetHandleByIndex(self, index: int) -> dict[str, Any]:
        return {"index": index, **self.seed["gpus"][index]}

    def nvmlDeviceGetName(self, handle: dict[str, Any]) -> bytes:
        return handle["name"].encode()

    def nvmlDeviceGetCudaComputeCapability(self, handle: dict[str, Any]) -> tuple[int, int]:
        return tuple(handle.get("capability", (9, 0)))  # type: ignore[return-value]

    def nvmlDeviceGetMemoryInfo(self, handle: dict[str, Any]) -> SimpleNamespace:
        mib = 1024 * 1024
        total, used = handle.get("total_mib", 81559) * mib, handle.get("used_mib", 0) * mib
        return SimpleNamespace(total=total, used=used, free=total - used)

    def nvmlDeviceGetUtilizationRates(self, handle: dict[str, Any]) -> SimpleNamespace:
        """``util`` a number, or a list read one reading at a time (the last one repeats)."""
        util = handle.get("util", 0)
        if isinstance(util, list):
            taken = self.readings.setdefault(handle["index"], 0)
            self.readings[handle["index"]] = taken + 1
            util = util[min(taken, len(util) - 1)]
        return SimpleNamespace(gpu=util, memory=0)

    def nvmlDeviceGetTotalEccErrors(self, handle: dict[str, Any], error_type: int, counter_type: int) -> int:
        """``ecc``: the uncorrected volatile count; absent, NOT_SUPPORTED like a GPU without ECC."""
        if "ecc" not in handle:
            raise NVMLError("Not Supported")
        return int(handle["ecc"])

    def nvmlDeviceGetRemappedRows(self, handle: dict[str, Any]) -> tuple[int, int, int, int]:
        """``rows``: (correctable, uncorrectable, pending, failure); absent, NOT_SUPPORTED like a pre-Ampere GPU."""
        if "rows" not in handle:
            raise NVMLError("Not Supported")
        return tuple(handle["rows"])  # type: ignore[return-value]

    def nvmlDeviceGetUUID(self, handle: dict[str, Any]) -> str:
        return f"GPU-fake-{handle['index']}"

    def nvmlDeviceGetComputeRunningProcesses(self, handle: dict[str, Any]) -> list[SimpleNamespace]:
        return [SimpleNamespace(pid=pid, usedGpuMemory=used * 1024 * 1024) for pid, used in handle.get("procs", [])]
