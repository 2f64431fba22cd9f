"""What a generic NCCL head says, and messages a paste wrapped across lines (issue 36 points 1 and 2).

- NCCL's ``unhandled system error`` (ncclSystemError: a system call failed) names no kind by itself. In a container
  on one node it is /dev/shm (the runbook's follow-up details: Docker, a pod); in a job over several nodes the
  network between them (dev_shm yields to nccl_network); with neither it leads with no runbook of either.
- In a container, NCCL's own connect failure to another node keeps the network between nodes.
- A message wrapped at a space by a terminal or a web page ("... killed by signal: Bus" / "error. It is possible
  that dataloader's workers are out of shared" / "memory.") still names its kind.

The reports are written for these tests; each runs the real registry, runbooks and (end to end) the shared index.
"""

from __future__ import annotations

from typing import Any

import pytest
from clikit import ask_json as ask
from clikit import lead_kind as _lead

from runbooks.choose import quoted_message
from runbooks.registry import unsignalled_generic

SYSTEM_ERROR = ("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:"
                "1970, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\n"
                "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error.")


def _kind(lines: list[str]) -> str | None:
    found = quoted_message(lines, unsignalled_generic("\n".join(lines)))
    return found[0].kind if found else None


def test_the_bare_system_error_names_no_kind_and_a_container_names_its_shared_memory() -> None:
    assert _kind(SYSTEM_ERROR.splitlines()) is None
    docker = ["we train 4 GPUs inside a docker container", *SYSTEM_ERROR.splitlines()]
    assert _kind(docker) == "dev_shm"
    assert _kind(["在 k8s 的 pod 里单机 8 卡训练报错", *SYSTEM_ERROR.splitlines()]) == "dev_shm"


def test_a_multi_node_connect_failure_keeps_the_network_beside_a_container_s_system_error() -> None:
    lines = ["docker run --gpus all trainer:latest",
             "node1:412:530 [0] NCCL WARN Net : Connect to 10.0.3.7<41275> failed : Connection refused",
             "RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error"]
    from agent.leads import LeadEvidence, decide

    lead = decide(LeadEvidence("\n".join(lines), None, lines[1:], "en"))
    assert lead is not None and lead.kind == "nccl_network"


def test_a_message_wrapped_across_lines_still_names_its_kind() -> None:
    wrapped = ["RuntimeError: DataLoader worker (pid 311) is killed by signal: Bus",
               "error. It is possible that dataloader's workers are out of shared",
               "memory. Please try to raise your shared memory limit."]
    assert _kind(wrapped) == "dev_shm"
    found = quoted_message(wrapped)
    assert found is not None and found[1] == wrapped[1]  # the line where the message begins
    # a line break between two unrelated lines is not read as one message
    assert _kind(["It is possible that dataloader's workers are out of", "office today, training resumes later"]) is None


pytestmark_e2e = pytest.mark.usefixtures("use_shared_index")




@pytestmark_e2e
def test_one_node_in_docker_leads_with_dev_shm_and_several_nodes_with_the_network(cli: Any) -> None:
    one = ask(cli, "DDP on one server with 4 A100s, run inside a docker container, fails at the first all_reduce:\n"
              + SYSTEM_ERROR)
    assert _lead(one) == "dev_shm" and one["lead"]["rule"] == "quoted"
    assert "--shm-size" in one["answer"] or "--ipc=host" in one["answer"]
    zh = ask(cli, "单机两卡，在容器中运行 torchrun 报错：\n" + SYSTEM_ERROR)
    assert _lead(zh) == "dev_shm" and zh["language"] == "zh"
    several = ask(cli, "two nodes (--nnodes 2), each a docker container with 8 GPUs, fail at init:\n" + SYSTEM_ERROR)
    assert _lead(several) == "nccl_network"
    bare = ask(cli, SYSTEM_ERROR)
    assert _lead(bare) not in ("dev_shm", "nccl_network")


@pytestmark_e2e
def test_a_wrapped_bus_error_pasted_from_a_notebook_is_dev_shm(cli: Any) -> None:
    answer = ask(cli, "My notebook in the course container stops while loading images:\n"
                 "RuntimeError: DataLoader worker (pid 88) is killed by signal: Bus\n"
                 "error. It is possible that dataloader's workers are out of shared\n"
                 "memory. Please try to raise your shared memory limit.")
    assert _lead(answer) == "dev_shm"


@pytest.mark.parametrize(("line", "kind"), [
    ("ModuleNotFoundError: No module named 'vllm.v1.engine.utils'", "vllm_unsupported"),
    ("ImportError: cannot import name 'CoreEngineProcManager' from 'vllm.v1.engine.utils'", "vllm_unsupported"),
    ("ModuleNotFoundError: No module named 'vllm._C'", "package_build"),  # its compiled extension: the install
    ("ModuleNotFoundError: No module named 'vllm'", None),  # not installed at all: the interpreter, not a release
])
def test_a_part_of_vllm_missing_is_a_framework_written_for_another_vllm_release(line: str, kind: str | None) -> None:
    from agent.exceptions import recognise

    raised = recognise([line])
    assert raised is not None and (raised.named_kind or None) == kind


def test_a_chinese_report_that_says_the_memory_blew_up_signals_an_oom() -> None:
    from runbooks.registry import signalled

    assert signalled("cuda_oom", "最终还是爆显存，请问怎么解决") is not None
    assert signalled("cuda_oom", "训练到一半显存炸了") is not None
    assert signalled("cuda_oom", "显存占用正常，训练很慢") is None


def test_an_environment_dump_naming_an_extension_s_arch_flags_keeps_the_extension() -> None:
    from agent.leads import LeadEvidence, decide

    dump = ("RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
            "maskrcnn arch flags     sm_86\nCUDA compiler           CUDA 11.8\nGPU 0                   Tesla V100-SXM2-32GB\n"
            "PyTorch                 2.1.0 @/opt/conda/lib/python3.10/site-packages/torch")
    lead = decide(LeadEvidence(dump, None, dump.splitlines()[:1], "en"))
    assert lead is not None and lead.kind == "extension_arch"
    bare = "RuntimeError: CUDA error: no kernel image is available for execution on the device\nGPU 0: Tesla V100"
    lead = decide(LeadEvidence(bare, None, bare.splitlines()[:1], "en"))
    assert lead is not None and lead.kind == "arch_mismatch"  # a GPU named, no extension: the PyTorch build


@pytestmark_e2e
def test_a_section_whose_first_command_traindoc_doubts_gives_way_to_the_exceptions_first_check(cli: Any) -> None:
    # A bare "unhandled system error": the answering section's first command (disable InfiniBand) is flagged by
    # traindoc's own claims as a diagnostic, not a fix; the first fix is the rerun that shows NCCL's own cause.
    answer = ask(cli, "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1275, "
                           "unhandled system error, NCCL version 2.14.3")
    verdict = answer["verdict"]
    assert "NCCL_DEBUG=INFO" in verdict["fix"] and not verdict["fix_flags"], verdict
    assert "NCCL_IB_DISABLE" not in verdict["fix"]
    flagged = [a for a in answer["advice"] if a["citation"] == 1 and a["kind"] == "claim"]
    assert flagged and "NCCL_IB_DISABLE" in answer["answer"], "the section's commands stay, under Fixes, with caveats"


@pytestmark_e2e
def test_a_generic_exception_nothing_answers_gets_its_first_check_as_its_one_fix(cli: Any) -> None:
    answer = ask(cli, "KeyError: 'input_ids'")
    assert answer["no_match"]
    fixes = answer["answer"].split("### Fixes", 1)
    assert len(fixes) == 2, answer["answer"][:2000]
    assert "which keys the data or config really has" in fixes[1].split("###", 1)[0]
    assert "which keys the data or config really has" in answer["verdict"]["fix"]


@pytest.mark.parametrize(("line", "first"), [
    ("RuntimeError: [enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried "
     "to allocate 40000000000000 bytes. Error code 12 (Cannot allocate memory)", True),  # 40 TB: a size gone wrong
    ("RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 2147483648 bytes. Error code 12",
     False),  # 2 GiB: the host's RAM ran out, its usual fixes first
])
@pytestmark_e2e
def test_a_cpu_allocation_no_machine_has_is_a_size_gone_wrong(cli: Any, line: str, first: bool) -> None:
    answer = ask(cli, line)
    assert _lead(answer) == "host_oom"
    assert ("free -b" in answer["verdict"]["fix"]) is first, answer["verdict"]


def test_nccl_s_unhandled_cuda_error_is_a_generic_head_whose_first_check_shows_the_cuda_call() -> None:
    from agent.exceptions import recognise

    raised = recognise(["torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda "
                        "error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3"])
    assert raised is not None and raised.name == "nccl_cuda_error" and "NCCL_DEBUG=INFO" in raised.check


def test_python_that_cannot_open_its_script_is_a_missing_file_with_the_path_to_check() -> None:
    from agent.exceptions import recognise

    raised = recognise(["python: can't open file '/workspace/train.py': [Errno 2] No such file or directory"])
    assert raised is not None and raised.name == "file_missing" and raised.thing == "/workspace/train.py"
    assert "ls -l '/workspace/train.py'" in raised.check


@pytest.mark.parametrize(("line", "kind"), [
    ("KeyError: 'qwen2'", "hf_api_change"),  # transformers' own model-type table lacks it: a release too old
    ("KeyError: 'qwen2_5_vl'", "hf_api_change"),
    ("KeyError: 'llama'", "hf_api_change"),
    ("KeyError: 'prompt'", "chat_template_format"),
    ("KeyError: 'lr_scheduler'", None),  # a key no table names: the exception alone
])
def test_a_missing_key_that_is_a_model_type_is_a_transformers_release_too_old(line: str, kind: str | None) -> None:
    from agent.exceptions import recognise

    raised = recognise([line])
    assert raised is not None and raised.name == "key_missing" and (raised.named_kind or None) == kind
