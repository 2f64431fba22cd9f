"""GPU inventory through NVML, falling back to nvidia-smi."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from tools.base import Clock, Finding, ProbeContext, ProbeResult, RunCommand, Status, failed, finish, run_command

NAME = "gpu_inventory"
SMI_GPU_QUERY = (
    "--query-gpu=index,name,compute_cap,memory.total,memory.used,utilization.gpu,driver_version,uuid",
    "--format=csv,noheader,nounits",
)
SMI_APPS_QUERY = ("--query-compute-apps=pid,process_name,used_memory,gpu_uuid", "--format=csv,noheader,nounits")
MEMORY_FULL_FRACTION = 0.9
# A GPU that runs a compute process is sampled a few times (NVML's utilisation is the share of the last sample period
# a kernel ran): a running job that averages below UNDERUSED_PCT waits on its input, the host or communication.
SAMPLES = 6
SAMPLE_INTERVAL_S = 0.25
UNDERUSED_PCT = 40


@dataclass
class Gpu:
    index: int
    name: str
    capability: str  # "9.0"
    memory_total_mib: int
    memory_used_mib: int
    utilization_pct: int | None
    uuid: str = ""
    processes: list[dict[str, Any]] = field(default_factory=list)  # pid, name, used_mib
    utilization_samples: list[int] = field(default_factory=list)  # a few readings while a process runs on it
    # Health counters NVML reports on data-center GPUs (None where the GPU or driver does not support them):
    ecc_uncorrected_volatile: int | None = None  # double-bit ECC errors since the driver loaded
    remapped_rows: dict[str, int] | None = None  # correctable, uncorrectable, pending, failure (A100/H100 and later)


@dataclass
class GpuFacts:
    source: str  # "nvml" or "nvidia-smi"
    driver_version: str
    cuda_driver_version: str | None  # newest CUDA the driver supports, "12.4"
    gpus: list[Gpu]


class GpuQueryError(Exception):
    """NVML/nvidia-smi answered with an error; ``call`` and ``message`` say exactly what failed."""

    def __init__(self, call: str, message: str, timed_out: bool = False) -> None:
        super().__init__(f"{call}: {message}")
        self.call, self.message, self.timed_out = call, message, timed_out


def load_nvml() -> Any | None:
    """The pynvml module, or None when nvidia-ml-py is not installed."""
    try:
        import pynvml  # heavy-ish and optional: imported only when a probe runs
    except ImportError:
        return None
    return pynvml


def available(ctx: ProbeContext, nvml: Any | None = None) -> tuple[bool, str]:
    if shutil.which("nvidia-smi", path=ctx.environ.get("PATH")):
        return True, ""
    nvml = nvml if nvml is not None else load_nvml()
    if nvml is not None:
        try:
            nvml.nvmlInit()
            nvml.nvmlShutdown()
            return True, ""
        except Exception as exc:  # NVMLError_LibraryNotFound and friends
            return False, f"NVML library not found ({exc}); nvidia-smi not found"
    return False, "NVML library not found (nvidia-ml-py not installed); nvidia-smi not found"


def read_nvml(nvml: Any, sleep: Callable[[float], None] = time.sleep, *, sample: bool = True) -> GpuFacts:
    """Raises GpuQueryError naming the failing NVML call. GPUs that run a compute process are sampled SAMPLES times
    (``sleep`` between readings; a test passes a clock that does not wait), unless not ``sample``."""
    call = "nvmlInit()"
    try:
        nvml.nvmlInit()
    except Exception as exc:
        raise GpuQueryError(call, str(exc)) from exc
    try:
        call = "nvmlSystemGetDriverVersion()"
        driver = _str(nvml.nvmlSystemGetDriverVersion())
        call = "nvmlSystemGetCudaDriverVersion()"
        cuda = int(nvml.nvmlSystemGetCudaDriverVersion())
        gpus = []
        call = "nvmlDeviceGetCount()"
        for index in range(int(nvml.nvmlDeviceGetCount())):
            call = f"nvmlDeviceGetHandleByIndex({index})"
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
            memory = nvml.nvmlDeviceGetMemoryInfo(handle)
            try:
                utilization: int | None = int(nvml.nvmlDeviceGetUtilizationRates(handle).gpu)
            except Exception:  # not supported on some (MIG) devices
                utilization = None
            procs = [
                {"pid": int(p.pid), "name": _process_name(p.pid), "used_mib": _mib(p.usedGpuMemory)}
                for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle)
            ]
            gpu = Gpu(index, _str(nvml.nvmlDeviceGetName(handle)), f"{major}.{minor}", _mib(memory.total),
                      _mib(memory.used), utilization, _str(nvml.nvmlDeviceGetUUID(handle)), procs)
            gpu.ecc_uncorrected_volatile, gpu.remapped_rows = _health(nvml, handle)
            gpus.append(gpu)
        if sample:
            _sample_busy(nvml, gpus, sleep)
    except Exception as exc:
        raise GpuQueryError(call, str(exc)) from exc
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:
            pass
    return GpuFacts("nvml", driver, f"{cuda // 1000}.{cuda % 1000 // 10}", gpus)


UNCORRECTED, VOLATILE = 1, 0  # NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC (nvml.h)


def _health(nvml: Any, handle: Any) -> tuple[int | None, dict[str, int] | None]:
    """The GPU's uncorrected ECC count since the driver loaded and its row-remapping state (read-only NVML queries;
    None for each a consumer GPU or an old driver does not support)."""
    try:
        ecc: int | None = int(nvml.nvmlDeviceGetTotalEccErrors(handle, UNCORRECTED, VOLATILE))
    except Exception:  # NVML_ERROR_NOT_SUPPORTED on GPUs without ECC
        ecc = None
    try:
        corr, unc, pending, failure = nvml.nvmlDeviceGetRemappedRows(handle)
        rows: dict[str, int] | None = {"correctable": int(corr), "uncorrectable": int(unc), "pending": int(pending),
                                       "failure": int(failure)}
    except Exception:  # before Ampere, or not supported
        rows = None
    return ecc, rows


def _sample_busy(nvml: Any, gpus: list[Gpu], sleep: Callable[[float], None]) -> None:
    """Utilisation readings of the GPUs that run a process, SAMPLE_INTERVAL_S apart (read-only NVML queries)."""
    busy = [gpu for gpu in gpus if gpu.processes and gpu.utilization_pct is not None]
    for gpu in busy:
        gpu.utilization_samples.append(int(gpu.utilization_pct or 0))
    for _ in range(SAMPLES - 1 if busy else 0):
        sleep(SAMPLE_INTERVAL_S)
        for gpu in busy:
            gpu.utilization_samples.append(int(nvml.nvmlDeviceGetUtilizationRates(
                nvml.nvmlDeviceGetHandleByIndex(gpu.index)).gpu))


def read_smi(ctx: ProbeContext, run: RunCommand, timeout_s: float) -> GpuFacts:
    """Raises GpuQueryError (timed_out set when nvidia-smi hung)."""
    clock = Clock(timeout_s)
    smi = shutil.which("nvidia-smi", path=ctx.environ.get("PATH")) or "nvidia-smi"
    rows = _smi_rows(run([smi, *SMI_GPU_QUERY], clock.left(), ctx.environ))
    gpus, driver, by_uuid = [], "", {}
    for row in rows:
        if len(row) < 8:
            raise GpuQueryError(f"{smi} {' '.join(SMI_GPU_QUERY)}", f"unexpected row: {', '.join(row)}")
        gpu = Gpu(int(row[0]), row[1], row[2], _int(row[3]) or 0, _int(row[4]) or 0, _int(row[5]), row[7])
        driver = row[6]
        gpus.append(gpu)
        by_uuid[gpu.uuid] = gpu
    for row in _smi_rows(run([smi, *SMI_APPS_QUERY], clock.left(), ctx.environ)):
        if len(row) >= 4 and row[3] in by_uuid:
            by_uuid[row[3]].processes.append({"pid": _int(row[0]), "name": row[1], "used_mib": _int(row[2])})
    return GpuFacts("nvidia-smi", driver, None, gpus)


def gpu_facts(ctx: ProbeContext, nvml: Any | None = None, run: RunCommand = run_command) -> GpuFacts | None:
    """Best-effort facts for other probes; None when no GPU interface answers."""
    nvml = nvml if nvml is not None else load_nvml()
    if nvml is not None:
        try:
            return read_nvml(nvml, sample=False)  # other probes need the inventory, not the job's utilisation
        except GpuQueryError:
            pass
    if shutil.which("nvidia-smi", path=ctx.environ.get("PATH")):
        try:
            return read_smi(ctx, run, min(ctx.timeout_s, 5.0))
        except GpuQueryError:
            return None
    return None


def gpu_count(ctx: ProbeContext) -> int | None:
    facts = gpu_facts(ctx)
    return None if facts is None else len(facts.gpus)


def probe(ctx: ProbeContext, nvml: Any | None = None, run: RunCommand = run_command,
          sleep: Callable[[float], None] = time.sleep) -> ProbeResult:
    """List the NVIDIA GPUs (name, compute capability, memory used/total, utilization, driver) and the processes using each."""  # noqa: E501 - the LLM-facing description is one line
    clock = Clock(ctx.timeout_s)
    nvml = nvml if nvml is not None else load_nvml()
    nvml_error = "nvidia-ml-py not installed"
    facts = None
    if nvml is not None:
        try:
            facts = read_nvml(nvml, sleep)
        except GpuQueryError as exc:
            nvml_error = f"{exc.call}: {exc.message}"
    if facts is None:
        if not shutil.which("nvidia-smi", path=ctx.environ.get("PATH")):
            reason = f"NVML library not found ({nvml_error}); nvidia-smi not found"
            return failed(NAME, clock, Status.UNAVAILABLE, reason,
                          nvml_error=nvml_error)
        try:
            facts = read_smi(ctx, run, clock.left())
        except GpuQueryError as exc:
            status = Status.TIMED_OUT if exc.timed_out else Status.ERROR
            return failed(NAME, clock, status, f"{exc.call} failed: {exc.message}", call=exc.call,
                          message=exc.message, nvml_error=nvml_error)
    evidence = asdict(facts)
    summary = f"{len(facts.gpus)} GPU(s), driver {facts.driver_version}: " + ", ".join(
        f"{g.index}:{g.name} (sm_{g.capability.replace('.', '')}, {g.memory_used_mib}/{g.memory_total_mib} MiB)"
        for g in facts.gpus
    )
    return finish(NAME, clock, _findings(facts), evidence, summary)


def _findings(facts: GpuFacts) -> list[Finding]:
    if not facts.gpus:
        return [Finding("NO_GPUS_VISIBLE", "problem", "The driver reports no GPUs",
                        f"{facts.source}: 0 devices, driver {facts.driver_version}",
                        "Check `nvidia-smi`, the container's --gpus flag and CUDA_VISIBLE_DEVICES.",
                        ("no gpu", "nvidia driver", "container gpus"))]
    found = []
    for gpu in facts.gpus:
        if gpu.memory_total_mib and gpu.memory_used_mib >= MEMORY_FULL_FRACTION * gpu.memory_total_mib:
            holders = ", ".join(f"pid {p['pid']} {p['name']} ({p['used_mib']} MiB)" for p in gpu.processes)
            found.append(Finding(
                "GPU_MEMORY_NEARLY_FULL", "problem",
                f"GPU {gpu.index} memory is {gpu.memory_used_mib}/{gpu.memory_total_mib} MiB used before your job",
                f"GPU {gpu.index} {gpu.name}: used {gpu.memory_used_mib} MiB of {gpu.memory_total_mib} MiB; "
                f"processes: {holders or 'none visible (other container or user)'}",
                "Find the holders with `nvidia-smi`; stop only the leftovers of your own runs, each by its PID "
                "(`kill -TERM <pid>`; to stop a whole torchrun job, its launcher's PID), or pick a free GPU with "
                "CUDA_VISIBLE_DEVICES.",
                ("cuda out of memory", "gpu memory", "leftover process"),
            ))
            continue
        found.extend(_health_findings(gpu))
        if (low := _underused(gpu)) is not None:
            found.append(Finding(
                "GPU_UNDERUTILISED", "info",
                f"GPU {gpu.index} averaged {low}% utilisation while a job ran on it",
                f"GPU {gpu.index} {gpu.name}: utilisation {gpu.utilization_samples} (%) over "
                f"{(len(gpu.utilization_samples) - 1) * SAMPLE_INTERVAL_S:.1f} s; processes: "
                + ", ".join(f"pid {p['pid']} {p['name']}" for p in gpu.processes),
                "The GPU waits for work: measure where a step's time goes (the step-time lines, `py-spy top --pid "
                "<PID>` of the training process, torch.profiler for a few steps) before changing batch size or "
                "DataLoader workers.",
                ("slow training", "gpu utilization", "gpu utilisation", "low utilization", "利用率", "训练慢"),
            ))
        if gpu.processes:
            found.append(Finding(
                "GPU_IN_USE", "info", f"GPU {gpu.index} already runs {len(gpu.processes)} process(es)",
                "; ".join(f"pid {p['pid']} {p['name']} {p['used_mib']} MiB" for p in gpu.processes),
                "", ("gpu memory", "shared gpu"),
            ))
    return found


def _health_findings(gpu: Gpu) -> list[Finding]:
    """What NVIDIA's memory-error guide says to act on: a row remap that failed (the GPU needs service), one pending
    (reset the GPU or reboot to apply it), uncorrected ECC errors since the driver loaded (drain the node)."""
    rows, ecc, name = gpu.remapped_rows or {}, gpu.ecc_uncorrected_volatile, f"GPU {gpu.index} {gpu.name}"
    topics = ("xid", "ecc", "fallen off the bus", "gpu hardware", "row remap", "硬件故障")
    found = []
    if rows.get("failure"):
        found.append(Finding("GPU_ROW_REMAP_FAILED", "problem", f"GPU {gpu.index} failed to remap a faulty memory row",
                             f"{name}: remapped rows {rows}", "Drain the node and contact NVIDIA support (RMA): a "
                             "remap failure is not fixed by a reset.", topics))
    elif rows.get("pending"):
        found.append(Finding("GPU_ROW_REMAP_PENDING", "problem", f"GPU {gpu.index} has a memory row remap pending",
                             f"{name}: remapped rows {rows}", "Reset the GPU when no process uses it (`nvidia-smi -r -i "
                             f"{gpu.index}`) or reboot the node; the remap takes effect only then.", topics))
    if ecc:
        found.append(Finding("GPU_ECC_UNCORRECTED", "problem", f"GPU {gpu.index} reported {ecc} uncorrected ECC "
                             "error(s) since the driver loaded", f"{name}: volatile uncorrected ECC count {ecc}",
                             "Drain the node and resume the job elsewhere; check `journalctl -k | grep -i 'NVRM: Xid'` "
                             "for Xid 48/63/64/94/95 and follow NVIDIA's action for each.", topics))
    return found


def _underused(gpu: Gpu) -> int | None:
    """The mean utilisation of a GPU sampled while a process ran on it, when below UNDERUSED_PCT."""
    samples = gpu.utilization_samples
    if len(samples) < 2:
        return None
    mean = round(sum(samples) / len(samples))
    return mean if mean < UNDERUSED_PCT else None


def _smi_rows(result: Any) -> list[list[str]]:
    if result.timed_out:
        raise GpuQueryError(result.call, "timed out (killed)", timed_out=True)
    if result.returncode != 0:
        raise GpuQueryError(result.call, (result.error or result.stderr or result.stdout).strip()
                            or f"exit status {result.returncode}")
    return [[c.strip() for c in line.split(",")] for line in result.stdout.splitlines() if line.strip()]


def _process_name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return "?"


def _str(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _mib(value: Any) -> int:
    return int(value or 0) // (1024 * 1024)


def _int(text: str) -> int | None:
    try:
        return int(float(text))
    except ValueError:  # "[N/A]", "[Not Supported]"
        return None
