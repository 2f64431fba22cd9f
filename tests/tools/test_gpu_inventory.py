import os
import stat
import time
from pathlib import Path

import pytest
from fakes.nvml import FakeNvml

from tools import gpu_inventory
from tools.base import ProbeContext, Status

H100 = {"name": "NVIDIA H100 80GB HBM3", "capability": (9, 0), "total_mib": 81559}


def codes(result):
    return sorted(f.code for f in result.findings)


@pytest.mark.parametrize(
    ("seed", "status", "expected"),
    [
        ({"gpus": [H100, H100]}, Status.OK, []),
        ({"gpus": [{**H100, "used_mib": 80000, "procs": [(4242, 80000)]}]}, Status.PROBLEM, ["GPU_MEMORY_NEARLY_FULL"]),
        ({"gpus": [{**H100, "used_mib": 2000, "procs": [(4242, 2000)]}]}, Status.OK, ["GPU_IN_USE", "GPU_UNDERUTILISED"]),
        ({"gpus": [{**H100, "used_mib": 2000, "util": 97, "procs": [(4242, 2000)]}]}, Status.OK, ["GPU_IN_USE"]),
        ({"gpus": []}, Status.PROBLEM, ["NO_GPUS_VISIBLE"]),
    ],
)
def test_nvml_rows(seed, status, expected):
    result = gpu_inventory.probe(ProbeContext(environ={"PATH": ""}), nvml=FakeNvml(seed), sleep=lambda s: None)
    assert result.status == status
    assert codes(result) == expected
    assert result.evidence["source"] == "nvml"


def test_a_running_job_s_gpu_is_sampled_and_low_utilisation_is_measured_not_guessed():
    waits: list[float] = []
    seed = {"gpus": [{**H100, "used_mib": 30000, "util": [5, 0, 12, 3, 8, 2], "procs": [(4242, 30000)]}, H100]}
    result = gpu_inventory.probe(ProbeContext(environ={"PATH": ""}), nvml=FakeNvml(seed), sleep=waits.append)
    low = [f for f in result.findings if f.code == "GPU_UNDERUTILISED"]
    assert len(low) == 1 and "5%" in low[0].summary and "[5, 0, 12, 3, 8, 2]" in low[0].evidence
    assert waits == [gpu_inventory.SAMPLE_INTERVAL_S] * (gpu_inventory.SAMPLES - 1)
    assert result.evidence["gpus"][1]["utilization_samples"] == []  # an idle GPU with no process is not sampled
    busy = {"gpus": [{**H100, "used_mib": 30000, "util": [93, 99, 97, 95, 98, 96], "procs": [(4242, 30000)]}]}
    result = gpu_inventory.probe(ProbeContext(environ={"PATH": ""}), nvml=FakeNvml(busy), sleep=lambda s: None)
    assert "GPU_UNDERUTILISED" not in codes(result)


def test_nvml_health_counters_say_what_nvidia_s_guide_says_to_do():
    seed = {"gpus": [{**H100, "ecc": 2, "rows": (0, 1, 1, 0)}, {**H100, "rows": (0, 3, 0, 1)}, {**H100, "ecc": 0,
                                                                                                "rows": (0, 0, 0, 0)}]}
    result = gpu_inventory.probe(ProbeContext(environ={"PATH": ""}), nvml=FakeNvml(seed), sleep=lambda s: None)
    assert result.status == Status.PROBLEM
    assert codes(result) == ["GPU_ECC_UNCORRECTED", "GPU_ROW_REMAP_FAILED", "GPU_ROW_REMAP_PENDING"]
    pending = next(f for f in result.findings if f.code == "GPU_ROW_REMAP_PENDING")
    assert "nvidia-smi -r -i 0" in pending.fix
    assert result.evidence["gpus"][2]["remapped_rows"] == {"correctable": 0, "uncorrectable": 0, "pending": 0, "failure": 0}
    consumer = gpu_inventory.probe(ProbeContext(environ={"PATH": ""}), nvml=FakeNvml({"gpus": [H100]}), sleep=lambda s: None)
    assert consumer.evidence["gpus"][0]["ecc_uncorrected_volatile"] is None and codes(consumer) == []


def test_other_probes_read_the_inventory_without_sampling():
    seed = {"gpus": [{**H100, "used_mib": 30000, "util": [5, 0], "procs": [(4242, 30000)]}]}
    facts = gpu_inventory.gpu_facts(ProbeContext(environ={"PATH": ""}), nvml=FakeNvml(seed))
    assert facts is not None and facts.gpus[0].utilization_samples == []


def test_nvml_facts_and_json_round_trip():
    result = gpu_inventory.probe(ProbeContext(environ={"PATH": ""}), nvml=FakeNvml({"gpus": [H100], "cuda": 12080}))
    assert result.evidence["gpus"][0]["capability"] == "9.0"
    assert result.evidence["cuda_driver_version"] == "12.8"
    assert type(result).from_dict(result.to_dict()) == result


def test_no_gpu_is_unavailable_with_reason():
    ctx = ProbeContext(environ={"PATH": ""})
    result = gpu_inventory.probe(ctx, nvml=FakeNvml({"error": "NVML Shared Library Not Found"}))
    assert result.status == Status.UNAVAILABLE
    assert "NVML library not found" in result.summary and "nvidia-smi not found" in result.summary
    ok, reason = gpu_inventory.available(ctx, nvml=FakeNvml({"error": "NVML Shared Library Not Found"}))
    assert not ok and "nvidia-smi not found" in reason


def _fake_smi(tmp_path: Path, body: str) -> dict[str, str]:
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text("#!/bin/sh\n" + body)
    smi.chmod(smi.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{smi.parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"}


GPU_CSV = "0, NVIDIA GeForce RTX 5090, 12.0, 32607, 31000, 97, 570.86.10, GPU-aaa\n"
APPS_CSV = "777, python, 30000, GPU-aaa\n"


def test_smi_fallback_parses_canned_output(tmp_path):
    env = _fake_smi(tmp_path, f'case "$1" in --query-gpu*) printf "{GPU_CSV}";; *) printf "{APPS_CSV}";; esac\n')
    result = gpu_inventory.probe(ProbeContext(environ=env), nvml=FakeNvml({"error": "no lib"}))
    assert result.evidence["source"] == "nvidia-smi"
    gpu = result.evidence["gpus"][0]
    assert (gpu["name"], gpu["capability"], gpu["memory_used_mib"]) == ("NVIDIA GeForce RTX 5090", "12.0", 31000)
    assert gpu["processes"] == [{"pid": 777, "name": "python", "used_mib": 30000}]
    assert codes(result) == ["GPU_MEMORY_NEARLY_FULL"]


def test_smi_failure_is_error_with_raw_message(tmp_path):
    message = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver"
    env = _fake_smi(tmp_path, f'echo "{message}" >&2; exit 9\n')
    result = gpu_inventory.probe(ProbeContext(environ=env), nvml=FakeNvml({"error": "x"}))
    assert result.status == Status.ERROR
    assert "couldn't communicate with the NVIDIA driver" in result.summary
    assert "--query-gpu" in result.evidence["call"]


def test_hanging_nvidia_smi_times_out_within_limit(tmp_path):
    env = _fake_smi(tmp_path, "sleep 60 & sleep 60\n")  # the child's own child must die too
    limit = 1.0
    start = time.monotonic()
    result = gpu_inventory.probe(ProbeContext(environ=env, timeout_s=limit), nvml=FakeNvml({"error": "x"}))
    elapsed = time.monotonic() - start
    assert result.status == Status.TIMED_OUT
    assert elapsed < limit + 5  # well short of the fake's 60 s: its tree was killed at the limit (generous for a busy machine)
