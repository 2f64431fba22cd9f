"""Issue 36 points 2 and 4: a generic exception whose named thing tells the kind (a launcher's variable, a moved
transformers API, a data set column), a pasted report's broad category that leaves the decision to the message it
quotes, a neighbour's own message beside a shared consequence, and a training hang with no stage named. The real
tables (agent/data/exceptions.json, runbooks/data/*.json, the runbooks) decide; nothing is faked."""

from __future__ import annotations

import pytest

from agent.exceptions import recognise
from agent.leads import LeadEvidence, decide


def lead_of(text: str, **kw: object) -> tuple[str, str] | None:
    lead = decide(LeadEvidence(text, None, [line for line in text.splitlines() if line.strip()], "en", **kw))  # type: ignore[arg-type]
    return (lead.kind, lead.rule) if lead is not None else None


@pytest.mark.parametrize(("line", "kind"), [
    ("KeyError: 'RANK'", "dist_env_missing"),
    ("    local_rank = int(os.environ['LOCAL_RANK'])\nKeyError: 'LOCAL_RANK'", "dist_env_missing"),
    ("KeyError: 'instruction'", "chat_template_format"),
    ("KeyError: 'conversations'", "chat_template_format"),
    ("ModuleNotFoundError: No module named 'transformers.models.mistral3'", "hf_api_change"),
    ("ImportError: cannot import name 'top_k_top_p_filtering' from 'transformers' (/x/transformers/__init__.py)",
     "hf_api_change"),
    ("AttributeError: 'BaichuanTokenizer' object has no attribute 'sp_model'", "hf_api_change"),
])
def test_the_named_thing_tells_the_kind(line: str, kind: str) -> None:
    assert lead_of(line) == (kind, "named_thing")


@pytest.mark.parametrize("line", [
    "KeyError: 'learning_rate_schedule'",  # a key of the user's own config: no kind
    "ModuleNotFoundError: No module named 'transformers'",  # the package itself missing is its install, not its API
    "ImportError: cannot import name 'broadcast_shapes' from 'numpy'",
    "AttributeError: 'LlamaForCausalLM' object has no attribute 'zero_gather_16bit_weights_on_model_save'",
])
def test_other_named_things_say_no_more_than_the_exception(line: str) -> None:
    assert lead_of(line) is None
    assert recognise([line]) is not None  # still explained as the exception it is


def test_an_attribute_missing_is_explained_with_its_first_check() -> None:
    raised = recognise(["AttributeError: 'FooConfig' object has no attribute 'rope_scaling'"])
    assert raised is not None and raised.name == "attribute_missing" and raised.thing == "FooConfig"
    assert "pip show transformers" in raised.check


@pytest.mark.parametrize("text", [
    "my training job is stuck and prints nothing",
    "训练卡住了怎么办",
    "GRPO fine-tuning on 2 nodes hangs after the evaluation",
])
def test_a_training_hang_with_no_stage_leads_with_the_command_that_finds_it(text: str) -> None:
    assert lead_of(text) == ("collective_timeout", "unstaged_hang")


@pytest.mark.parametrize("text", [
    "the training loss is stuck at 2.3",  # a value that stops moving is no hang
    "wandb hangs uploading files at the end of training",  # a logger's upload
    "I'm stuck on an issue with my PPO training",  # the idiom
    "vllm serve hangs when I send the first request",  # an inference server
    "training hangs while loading the checkpoint shards",  # it never started training
])
def test_what_is_not_a_training_hang_is_not_led_as_one(text: str) -> None:
    assert lead_of(text) != ("collective_timeout", "unstaged_hang")


def test_a_named_stage_comes_before_the_unstaged_fallback() -> None:
    assert lead_of("training hangs in allreduce after a few steps") == ("collective_timeout", "hang_stage")
    assert lead_of("pretraining is stuck at: compiling and loading fused kernels ...") == ("op_build_failure", "hang_stage")


def test_a_neighbour_s_own_message_beside_a_shared_consequence_leads() -> None:
    shared = "RuntimeError: CUDA error: no kernel image is available for execution on the device"
    assert lead_of(shared + "\nwhile building my flash-attn extension")[0] == "extension_arch"  # type: ignore[index]
    pytorch = shared + ("\nNVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current "
                        "PyTorch installation.")
    assert lead_of(pytorch)[0] == "arch_mismatch"  # type: ignore[index]


def test_an_nccl_info_line_every_pcie_machine_prints_names_no_kind() -> None:
    text = ("multi-node training fails\n"
            "host-a:100:200 [1] NCCL INFO P2P is disabled between connected GPUs 1 and 0. You can repress this "
            "message with NCCL_IGNORE_DISABLED_P2P=1.")
    assert lead_of(text) is None or lead_of(text)[0] != "slow_training"  # type: ignore[index]


def test_a_pasted_report_s_broad_category_leaves_the_lead_to_the_message_it_quotes() -> None:
    from agent.logs import pasted_job

    text = ("ncclInvalidUsage when I start 4 processes\n"
            "[rank3]: torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1691, invalid usage "
            "(run with NCCL_DEBUG=WARN for details), NCCL version 2.21.5\n"
            "[rank3]: ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\n"
            "[rank3]: Last error:\n"
            "[rank3]: Duplicate GPU detected : rank 3 and rank 0 both on CUDA device 1b000\n")
    job = pasted_job(text)
    errors = [line for line in text.splitlines() if "Error" in line or "error" in line]
    lead = decide(LeadEvidence(text, job, errors, "en", pasted=job is not None))
    assert lead is not None and lead.kind == "duplicate_gpu"


def test_a_section_about_a_neighbour_of_the_leading_kind_may_follow_it() -> None:
    from agent.answer import Citation
    from agent.lead import about_the_same_failure
    from runbooks.catalog import runbooks
    from runbooks.registry import neighbours_of

    book = runbooks()[("collective_timeout", "en")]
    assert "nccl_network" in neighbours_of("collective_timeout")
    seed = "corpus/004_f7d4acab9feaf887.txt"
    multi_node = Citation(n=1, source=seed, section="故障排除指南 > 分布式训练问题 > 问题：多节点训练失败", chunk_id="a",
                          score=0.5, text="")
    oom = Citation(n=2, source=seed, section="故障排除指南 > 显存问题 > 问题：显存溢出 (Out of Memory, OOM) 错误", chunk_id="b",
                   score=0.5, text="")
    assert [c.chunk_id for c in about_the_same_failure(book, [multi_node, oom], set())] == ["a"]


@pytest.mark.parametrize("module", ["amp_C", "flash_attn_2_cuda", "fused_layer_norm_cuda"])
def test_a_compiled_extension_module_missing_is_the_package_s_build_not_the_project_s_own(module: str) -> None:
    text = ("Traceback (most recent call last):\n"
            '  File "/opt/conda/lib/python3.10/site-packages/somelib/ops/__init__.py", line 3, in <module>\n'
            f"    import {module}\nModuleNotFoundError: No module named '{module}'")
    assert lead_of(text) == ("package_build", "named_thing")
    raised = recognise(text.splitlines())
    assert raised is not None and raised.own_kind == ""  # no project's own package


def test_a_project_s_own_module_still_leads_its_own_runbook() -> None:
    assert lead_of("ModuleNotFoundError: No module named 'myproject'") == ("own_package_import", "own_module")


def test_an_nccl_info_line_naming_a_missing_plugin_library_names_no_kind() -> None:
    text = ("two nodes fail at the first all_reduce\n"
            "host-b:51:51 [0] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: No such "
            "file or directory No plugin found (libnccl-net.so), using internal implementation\n"
            "host-b:51:80 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.7<0>")
    assert (lead_of(text) or ("", ""))[0] != "cuda_lib_import"
    plain = "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory"
    assert lead_of(plain) == ("cuda_lib_import", "quoted")  # the same words outside an INFO line still do


def test_invalid_device_function_is_an_extension_without_this_gpu_s_kernel_not_the_segfault_after_it() -> None:
    text = ("RuntimeError: CUDA error: invalid device function\n"
            "For debugging consider passing CUDA_LAUNCH_BLOCKING=1.\nSegmentation fault (core dumped)\n"
            "MyDet Compiler: GCC 7.3\nMyDet CUDA Compiler: 10.1")
    assert lead_of(text) == ("extension_arch", "quoted")  # "GCC 7" is no compute capability of arch_mismatch's


@pytest.mark.parametrize("line", [
    "RuntimeError: probability tensor contains either `inf`, `nan` or element < 0",  # as torch prints it
    "RuntimeError: probability tensor contains either inf, nan or element < 0",  # backticks lost in a paste
])
def test_sampling_from_nan_logits_is_the_nan_runbook(line: str) -> None:
    assert lead_of(f"GRPO rollouts crash after a few hundred steps\n{line}") == ("nan_loss", "quoted")


@pytest.mark.parametrize("text", [
    "pip install flash-attn fails:\n  ModuleNotFoundError: No module named 'torch'\n  error: subprocess-exited-with-error",
    "直接运行 pip install -r requirements.txt 时在安装 flash_attn 处报错：ModuleNotFoundError: No module named 'torch'",
])
def test_torch_missing_while_pip_builds_a_gpu_package_is_the_build_isolation(text: str) -> None:
    assert lead_of(text) == ("package_build", "named_thing")


def test_torch_missing_when_a_job_runs_is_no_build() -> None:
    raised = recognise(["$ python train.py", "ModuleNotFoundError: No module named 'torch'"])
    assert raised is not None and raised.named_kind == "" and raised.own_kind == ""  # an install, no runbook's kind
    assert lead_of("$ python train.py\nModuleNotFoundError: No module named 'torch'") is None


def test_a_storage_that_cannot_resize_while_a_checkpoint_loads_is_the_checkpoint_not_the_batch() -> None:
    loading = ("During inference I get: RuntimeError: Trying to resize storage that is not resizable\n"
               "It happens at model = LightningModel.load_from_checkpoint(path) after FSDP training")
    assert lead_of(loading) == ("checkpoint_mismatch", "named_thing")
    collating = ('  File "/x/torch/utils/data/_utils/collate.py", line 141, in default_collate\n'
                 "    return torch.stack(batch, 0, out=out)\nRuntimeError: Trying to resize storage that is not resizable")
    assert lead_of(collating) is None  # the DataLoader's batch of samples of different sizes: the exception alone
