"""Issue 36 point 1: a kind whose failure came at a moment that belongs to a neighbour narrows to it (registry:
narrows_to). An out-of-memory error while an FSDP job saves its checkpoint is the full state dict gathered on one GPU
(the FSDP runbook's 'How to recognise it'), and its first fix gathers with CPU offload; the same OOM during training,
or while a job without FSDP saves, stays the out-of-memory runbook. Real tables, real index (tests/conftest.py)."""

from __future__ import annotations

from typing import Any

import pytest

from runbooks.registry import kind, narrowed, problems
from tests.clikit import ask_json, lead_kind


@pytest.mark.parametrize("text", [
    "CUDA out of memory while saving the checkpoint; training with --fsdp 'full_shard auto_wrap' runs fine",
    "torch.OutOfMemoryError at the end when saving the model, FullyShardedDataParallel on 8 A100",
    "用FSDP训练正常，保存模型的时候报 CUDA out of memory",
    "OOM during checkpointing with fully_shard (FSDP2)",
])
def test_an_oom_at_an_fsdp_save_narrows_to_the_state_dict_runbook(text: str) -> None:
    found = narrowed("cuda_oom", text)
    assert found is not None and found[0] == "fsdp_state_dict" and found[2] == "cpu_offload=True", found


@pytest.mark.parametrize("text", [
    "CUDA out of memory at step 40 with --fsdp full_shard; --save_steps 500",  # training, not the save
    "CUDA out of memory while saving the checkpoint with DeepSpeed ZeRO-3",  # no FSDP: another kind's save
    "FSDP job: CUDA out of memory in the forward pass of step 3",
])
def test_an_oom_elsewhere_stays_the_oom(text: str) -> None:
    assert narrowed("cuda_oom", text) is None


def test_a_kind_narrows_only_to_its_neighbours() -> None:
    own = kind("cuda_oom")
    assert own is not None and set(own.narrows_to) <= set(own.neighbours)
    assert not problems()


@pytest.mark.usefixtures("use_shared_index")
def test_ask_leads_an_oom_at_an_fsdp_save_with_cpu_offload_first(cli: Any) -> None:
    answer = ask_json(cli, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
                           "It happens while saving the checkpoint after the last step; training with "
                           "--fsdp 'full_shard auto_wrap' works")
    assert lead_kind(answer) == "fsdp_state_dict", answer["lead"]
    assert "cpu_offload=True" in answer["answer"].split("Fixes")[0], answer["answer"][:1200]


@pytest.mark.usefixtures("use_shared_index")
def test_ask_keeps_an_oom_in_training_under_fsdp_as_the_oom(cli: Any) -> None:
    answer = ask_json(cli, "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
                           "at step 12 of training with --fsdp 'full_shard auto_wrap', --save_steps 500")
    assert lead_kind(answer) == "cuda_oom", answer["lead"]


@pytest.mark.parametrize("text", [
    "I got an out of memory error, but after stopping the process it disappears from nvidia-smi, yet it still holds "
    "GPU memory and utilisation stays at 100%",
    "CUDA out of memory: 训练进程结束后显存仍然被占用，nvidia-smi 看不到进程",
])
def test_an_oom_whose_memory_outlives_the_job_narrows_to_the_leftover_processes(text: str) -> None:
    found = narrowed("cuda_oom", text)
    assert found is not None and found[0] == "orphan_gpu_processes", found


@pytest.mark.parametrize("text", [
    "CUDA out of memory after step 100, still OOM with batch size 1",
    "OOM at start-up; after I stopped the other notebook it trained fine",  # stopped, and nothing stays held
])
def test_an_oom_of_the_job_itself_does_not_narrow_to_leftovers(text: str) -> None:
    found = narrowed("cuda_oom", text)
    assert found is None or found[0] != "orphan_gpu_processes", found


def test_pytorchs_own_arch_warning_beside_an_extension_narrows_to_the_wheel() -> None:
    """'no kernel image' with vLLM named reads as an extension built without the arch, but PyTorch's own warning that
    its installed build does not support the GPU names the wheel (arch_mismatch) first."""
    text = ("nvidia geforce rtx 5090 with cuda capabilities sm_120 is not compatible with the current Pytorch "
            "installation.\ncuda error: no kernel image is available for execution on the device.\n"
            "I installed the nightly PyTorch build, then vLLM is incompatible with it")
    found = narrowed("extension_arch", text)
    assert found is not None and found[0] == "arch_mismatch", found
    assert narrowed("extension_arch", "flash_attn: CUDA error: no kernel image is available (built for sm_80)") is None


def test_a_long_message_retyped_in_lower_case_is_still_quoted() -> None:
    from runbooks.choose import quoted_message

    found = quoted_message(["nvidia geforce rtx 5090 with cuda capabilities sm_120 is not compatible with the "
                            "current pytorch installation."])
    assert found is not None and found[0].kind == "arch_mismatch", found
    short = quoted_message(["the job exited with an out of memory error"])  # short messages keep their case
    assert short is None or short[0].kind != "arch_mismatch"
