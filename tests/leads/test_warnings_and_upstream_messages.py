"""What a report quotes decides, read as upstream prints it: a warning the job went on past (accelerate's "Using
DeepSpeed's value", the DataLoader's suggested workers) names its kind only where nothing else does and the job does
not hang; pip's own build errors are a package build whatever module the build missed; accelerate's P2P refusal,
DeepSpeed's "return code = -9", cuBLAS refusing a bf16 GEMM and a title's "illegal memory access" name their kinds;
a DeepSpeed config's `"loss_scale": 0` and "gradient checkpointing" are settings, not failures. The real tables and
lead rules throughout (runbooks' front matter, runbooks/data/kinds.json, agent.leads)."""

from __future__ import annotations

import pytest

from agent.leads import LeadEvidence, decide
from jobs.diagnosis import HANG_WORDS
from runbooks.registry import kinds, notices, signalled

GA_WARNING = ("WARNING:accelerate.accelerator:Gradient accumulation steps mismatch: GradientAccumulationPlugin has 1, "
              "DeepSpeed config has 4. Using DeepSpeed's value.")
OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB "
       "of which 1.06 GiB is free.")


def lead_of(text: str, errors: list[str] | None = None, lang: str = "en") -> str | None:
    found = decide(LeadEvidence(text, None, errors or [], lang))  # type: ignore[arg-type]
    return found.kind if found is not None else None


def test_notices_are_messages_of_their_kind() -> None:
    for kind in kinds().values():
        assert kind.notices <= set(kind.messages), kind.name
    assert "Gradient accumulation steps mismatch: GradientAccumulationPlugin has" in notices()


def test_a_resolved_warning_above_the_real_error_does_not_lead() -> None:
    paste = "\n".join(["Using auto half precision backend", GA_WARNING, "Traceback (most recent call last):",
                       '  File "train.py", line 88, in <module>', OOM])
    assert lead_of("why did my run die?\n" + paste, [OOM]) == "cuda_oom"


def test_a_resolved_warning_is_not_why_a_job_hangs() -> None:
    report = "\n".join(["My 8-GPU sft run hangs right after the model loads and never reaches step 1.", GA_WARNING,
                        "[INFO] [engine.py:1234] DeepSpeed engine created"])
    assert lead_of(report) != "accelerate_deepspeed_conflict"
    chinese = "\n".join(["8 卡 sft 训练加载完模型后就卡住不动了", GA_WARNING])
    assert lead_of(chinese, lang="zh") != "accelerate_deepspeed_conflict"


def test_the_warning_asked_about_alone_still_names_its_kind() -> None:
    assert lead_of("What does this mean, is my gradient accumulation wrong?\n" + GA_WARNING) == \
        "accelerate_deepspeed_conflict"
    dataloader = ("UserWarning: This DataLoader will create 16 worker processes in total. Our suggested max number of "
                  "worker in current system is 8, which is smaller than what this DataLoader is going to create. Please "
                  "be aware that excessive worker creation might get DataLoader running slow or even freeze")
    assert lead_of("training is slow, I see this warning\n" + dataloader) == "slow_training"


def test_pips_build_errors_are_a_package_build_whatever_module_the_build_missed() -> None:
    paste = "\n".join([
        "pip install flash-attn --no-build-isolation fails:",
        "  × Getting requirements to build wheel did not run successfully.",
        "      ModuleNotFoundError: No module named 'pkg_resources'",
        "  note: This error originates from a subprocess, and is likely not a problem with pip.",
        "error: metadata-generation-failed",
        "× Encountered error while generating package metadata.",
    ])
    assert lead_of(paste) == "package_build"


def test_upstream_messages_name_their_kinds() -> None:
    accelerate = ("NotImplementedError: Using RTX 4000 series doesn't support faster communication broadband via P2P or "
                  'IB. Please set `NCCL_P2P_DISABLE="1"` and `NCCL_IB_DISABLE="1" or use `accelerate launch` which will '
                  "do this automatically.")
    assert lead_of("every time I start training on my 4090s:\n" + accelerate) == "consumer_gpu_p2p"
    assert lead_of("deepspeed train.py exits: return code = -9 after the weights load") == "host_oom"
    cublas = ("RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasGemmStridedBatchedEx(handle, "
              "opa, opb, (int)m, (int)n, (int)k, (void*)&falpha, a, CUDA_R_16BF, (int)lda, stridea, b, CUDA_R_16BF`")
    assert lead_of("fine-tuning on an old Tesla M40\n" + cublas, [cublas]) == "bf16_unsupported"
    assert lead_of("illegal memory access\nit happens after several successful steps of training") == \
        "cuda_illegal_access"


def test_cublas_not_supported_without_bf16_is_not_the_bf16_kind() -> None:
    fp32 = ("RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasSgemm( handle, opa, opb, m, n, k, "
            "&alpha, a, lda, b, ldb, &beta, c, ldc)`")
    assert lead_of(fp32, [fp32]) != "bf16_unsupported"


@pytest.mark.parametrize("setting", [
    '"fp16": {\n  "enabled": "auto",\n  "loss_scale": 0,\n  "initial_scale_power": 16\n}',
    "--fp16 True --per_device_train_batch_size 16",
    "FP16 causes NAN after optimizer.step",
])
def test_fp16_settings_do_not_signal_the_loss_scale_kind(setting: str) -> None:
    assert signalled("fp16_loss_scale", setting) is None


@pytest.mark.parametrize("message", [
    "[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: 65536, reducing to 32768",
    "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 16384",
    "fp16 训练时一直梯度溢出",
])
def test_loss_scale_messages_still_signal_it(message: str) -> None:
    assert signalled("fp16_loss_scale", message) is not None


def test_an_fp16_nan_is_the_nan_kind() -> None:
    assert lead_of("FP16 causes NAN after optimizer.step\nIf the model is FP16 the loss becomes NAN; FP32 fixes it") \
        != "fp16_loss_scale"


@pytest.mark.parametrize("line", [
    "05/17/2024 01:30:26 - INFO - llmtuner.model.utils.checkpointing - Gradient checkpointing enabled.",
    "`use_cache=True` is incompatible with gradient checkpointing. Setting `use_cache=False`.",
    "model.gradient_checkpointing_enable()",
    "activation checkpointing is on",
])
def test_gradient_checkpointing_is_no_checkpoint_file(line: str) -> None:
    assert signalled("checkpoint_mismatch", line) is None
    assert signalled("checkpoint_corrupt", line) is None


def test_a_checkpoint_file_still_signals_its_kinds() -> None:
    assert signalled("checkpoint_mismatch", "loading the checkpoint from step 500 fails") is not None
    assert signalled("checkpoint_corrupt", "the checkpoint file is truncated") is not None


@pytest.mark.parametrize("words", ["程序输出 inputs 后就没有动静了", "跑起来以后一直没动静"])
def test_no_sign_of_life_is_a_hang(words: str) -> None:
    assert HANG_WORDS.search(words)


@pytest.mark.parametrize("text", [
    "Training with FP16 leads to loss exploding to NaN, but BF16 training works normally.",
    "--bf16 True --per_device_train_batch_size 4",
    "我们用 bf16 训练 qwen2，loss 正常",
])
def test_bf16_in_use_is_not_bf16_unsupported(text: str) -> None:
    assert signalled("bf16_unsupported", text) is None


@pytest.mark.parametrize("text", [
    "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has "
    "compute capability 7.5.",
    "V100 不支持 bf16，怎么微调",
    "running --bf16 on a V100 fails",
    "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling `cublasGemmEx(handle, opa, opb, m, n, k, "
    "&falpha, a, CUDA_R_16BF, lda, b, CUDA_R_16BF, ldb)`",
])
def test_bf16_on_a_gpu_without_it_signals_the_kind(text: str) -> None:
    assert signalled("bf16_unsupported", text) is not None


RAY_DEAD_WORKER = ("The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit "
                   "detail: Worker unexpectedly exits with a connection error code 2. End of file. There are some "
                   "potential root causes. (1) The process is killed by SIGKILL by OOM killer due to high memory usage. "
                   "(2) ray stop --force is called. (3) The worker is crashed unexpectedly due to SIGSEGV or other "
                   "unexpected errors.")


def test_rays_own_memory_kill_and_its_dead_worker_are_the_host_running_out() -> None:
    ray_oom = ("ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.\nMemory on the "
               "node (IP: 10.0.0.3) was 121.35GB / 125.53GB (0.966714), which exceeds the memory usage threshold of 0.95.")
    assert lead_of("my GRPO run under Ray dies at the rollout\n" + ray_oom) == "host_oom"
    assert lead_of("ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.\n"
                   + RAY_DEAD_WORKER) == "host_oom"


def test_rays_list_of_possible_causes_yields_to_the_cause_printed_beside_it() -> None:
    illegal = "(RayWorkerWrapper pid=2815) RuntimeError: CUDA error: an illegal memory access was encountered"
    assert lead_of("\n".join([illegal, RAY_DEAD_WORKER])) == "cuda_illegal_access"


def test_a_likeness_of_a_kind_the_report_shows_nothing_of_yields_to_the_neighbour_it_shows() -> None:
    """Retrieval finds NCCL's invalid-argument runbook most alike; the report says nothing of an invalid argument but
    names its RTX 4090s and P2P: the kind it yields to (registry: yields_to) leads, on the report's own words."""
    from agent.leads import Retrieved

    report = ("Training fails with an NCCL error saying peer-to-peer (P2P) access is not supported between the GPUs, "
              "although NCCL_P2P_DISABLE=1 is exported. GPUs: 4x RTX 4090")
    found = Retrieved("corpus/runbooks/en/nccl_invalid_argument.md", 0.96)
    lead = decide(LeadEvidence(report, None, [], "en", found, 0.67, ("corpus/002_x.txt", "a section")))
    assert lead is not None and lead.kind == "consumer_gpu_p2p", lead
    invalid = "NCCL WARN Cuda failure 'invalid argument' in NVLS setup on our H100 node"
    lead = decide(LeadEvidence(invalid, None, [], "en", found, 0.67, ("corpus/002_x.txt", "a section")))
    assert lead is not None and lead.kind == "nccl_invalid_argument", lead


def test_rays_list_of_causes_is_no_signal_of_the_oom_killer() -> None:
    """A peer gone mid-collective (quiet_rank_exit's message) beside Ray's list of possible causes: the list names
    the OOM killer whatever killed the worker, so the kind quiet_rank_exit yields to (host_oom) is not shown."""
    nccl = ("[rank1]:[E1224 13:23:05 ProcessGroupNCCL.cpp:542] [Rank 12] Collective WorkNCCL(SeqNum=1, OpType=BROADCAST) "
            "raised the following async exception: NCCL error: remote process exited or there was a network error")
    assert signalled("host_oom", RAY_DEAD_WORKER) is None
    assert lead_of("\n".join([nccl, RAY_DEAD_WORKER])) == "quiet_rank_exit"


@pytest.mark.parametrize(("line", "kind"), [
    # PEFT's message as older releases print it, or as a title retypes it, without its "Please check ..." tail
    ("运行 AdaLoRA 时报错 Target modules ['query', 'value'] not found in the base model.", "lora_peft_misuse"),
    ("ValueError: Target modules {'q_proj', 'v_proj'} not found in the base model. Please check the target modules "
     "and try again.", "lora_peft_misuse"),
    # vLLM's MiniCPM-V class checks the model's release (vllm/model_executor/models/minicpmv.py)
    ("ValueError: Currently, MiniCPMV only supports versions 2.0, 2.5, 2.6, 4.0. Got version: (4, 5)",
     "vllm_unsupported"),
])
def test_upstream_messages_as_users_paste_them_name_their_kind(line: str, kind: str) -> None:
    assert lead_of(line, [line]) == kind
