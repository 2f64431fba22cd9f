"""An environment report pasted into a question (`accelerate env`, `python -m torch.utils.collect_env`, an inference
engine's own check) lists every platform it looked for: "PyTorch XPU available: False" on a CUDA machine names no
platform the job runs on (common/absent_platforms.py), so it neither refuses the answer as another accelerator's nor
rules CUDA's kinds out; a line that says the platform is there still does. A shell's own segfault line, as bash or
zsh prints it, is the native-crash runbook's. The real index (tests/conftest.py) and real tables."""

from __future__ import annotations

from typing import Any

import pytest

from agent.stated import stated_facts
from common.absent_platforms import without_absent_platforms
from corpus.families import detect
from tests.clikit import ask_json, lead_kind

ACCELERATE_ENV = """accelerate launch stuck forever
### System Info
- `Accelerate` version: 0.33.0
- Platform: Linux-6.5.0-28-generic-x86_64-with-glibc2.35
- PyTorch version (GPU?): 2.4.0 (True)
- PyTorch XPU available: False
- PyTorch NPU available: False
- PyTorch MLU available: False
- PyTorch MUSA available: False
- GPU type: NVIDIA GeForce RTX 4090
- num_processes: 8
The job never gets to the first step on 8 RTX 4090 cards in one machine."""

COLLECT_ENV = """Is debug build: False
CUDA used to build PyTorch: 12.1
ROCM used to build PyTorch: N/A
HIP runtime version: N/A
MPS available: False"""


@pytest.mark.parametrize("text", [ACCELERATE_ENV, COLLECT_ENV])
def test_a_platform_said_to_be_absent_is_no_platform_of_the_job(text: str) -> None:
    platforms = [family.name for family in detect(text) if family.kind == "platform"]
    assert platforms == []
    assert "not CUDA" not in stated_facts(text)


@pytest.mark.parametrize("text", [
    "PyTorch XPU available: True\nRuntimeError: xpu device lost",
    "训练跑在昇腾 NPU 上，HCCL 超时",
    "we run on ROCm 6.1 with MI250X",
    "RuntimeError: MPS backend out of memory (MPS allocated: 5.50 GB, other allocations: 14.76 GB)",
    "ROCM used to build PyTorch: N/A\nOS: macOS 14.5 (arm64)",  # collect_env on a Mac: no ROCm, but a Mac
])
def test_a_platform_the_job_runs_on_is_still_read(text: str) -> None:
    assert "not CUDA" in stated_facts(text) or any(f.kind == "platform" for f in detect(text))


def test_only_the_absent_lines_are_dropped() -> None:
    kept = without_absent_platforms("- PyTorch XPU available: False\n- GPU type: NVIDIA GeForce RTX 4090\n")
    assert "XPU" not in kept and "RTX 4090" in kept


@pytest.mark.usefixtures("use_shared_index")
def test_a_hang_pasted_with_accelerate_env_is_answered_not_refused_as_intel_xpu(cli: Any) -> None:
    answer = ask_json(cli, ACCELERATE_ENV)
    assert answer["no_match"] is False
    assert "XPU" not in (answer["verdict"] or {}).get("cause", "")
    assert lead_kind(answer) in ("consumer_gpu_p2p", "collective_timeout")


@pytest.mark.usefixtures("use_shared_index")
@pytest.mark.parametrize("line", ["Segmentation fault (core dumped)", "zsh: segmentation fault (core dumped)  python train.py"])
def test_a_shells_own_segfault_line_is_the_native_crash_runbook(cli: Any, line: str) -> None:
    answer = ask_json(cli, f"training runs for about 100 epochs, then the terminal shows:\n{line}")
    assert lead_kind(answer) == "native_crash"
