"""Issue 36 points 1-3: the words that name (or rule out) a hang's stage are read as what the report says about its
run, not as parts of a path, an environment listing or a library's routine start-up lines. A DeepSpeed job that hangs
after "Loading checkpoint shards" never reached its first step (a checkpoint loaded is no checkpoint being saved); a
model folder named "text-generation-webui" is no generation; "- DeepSpeed version: not installed" names no DeepSpeed
job; a GAN's or a diffusion model's "generator" is no generate(); loss lines printed before the hang are the run's
progress, not a loss that stopped moving. A module that runs only for some batches (text-only batches past a vision
encoder, LayerDrop) under FSDP is collective_mismatch with the fix that runs it on every rank; "stops outputting" is a
hang. Real tables (runbooks/data/hang_stages.json, runbooks/data/kinds.json)."""

from __future__ import annotations

import pytest

from common.absent_platforms import without_absent_packages
from jobs.diagnosis import HANG_WORDS
from runbooks.choose import hang_stage_named
from runbooks.registry import stated_kind

LOADED = ("Loading checkpoint shards: 100%|██████████| 4/4 [00:09<00:00,  2.31s/it]\n"
          "[INFO|modeling_utils.py:4112] >> All the weights of LlamaForCausalLM were initialized from the model "
          "checkpoint at /data/models/text-generation-webui/models/llama-7b.\n"
          "[INFO|configuration_utils.py:537] >> loading configuration file /data/models/llama-7b/generation_config.json")

ENV_LISTING = ("- `transformers` version: 4.51.0\n- Platform: Linux\n- Accelerate version: 1.2.0\n"
               "- DeepSpeed version: not installed\n- PyTorch version (GPU?): 2.6.0+cu124 (True)\n")


@pytest.mark.parametrize(("text", "kind"), [
    ("With --deepspeed ds_z2.json the run is stuck after the model loads; without it there is no hang.\n" + LOADED,
     "deepspeed_init_hang"),
    ("deepspeed 训练卡住不动，日志停在这里：\n" + LOADED, "deepspeed_init_hang"),
    ("Multimodal FSDP training hangs when some batches do not contain images\n" + ENV_LISTING, "collective_mismatch"),
    ("训练卡住：数据里混有纯文本样本，FSDP 包装了视觉编码器", "collective_mismatch"),
    ("FSDP training with layer drop hangs after a few hundred steps", "collective_mismatch"),
])
def test_the_stage_is_read_from_what_the_report_says_about_its_run(text: str, kind: str) -> None:
    found = hang_stage_named(text)
    assert found is not None and found[0].kind == kind, found and found[0].kind


def test_a_module_skipped_on_some_ranks_calls_for_running_it_on_every_rank() -> None:
    found = hang_stage_named("FSDP job hangs: text-only batches never call the vision tower")
    assert found is not None and found[0].kind == "collective_mismatch" and "model.visual" in found[2], found


@pytest.mark.parametrize(("text", "kind"), [
    ("DeepSpeed training hangs while saving the checkpoint at step 500", "deepspeed_init_hang"),  # saving: a later part
    ("8 A100, DeepSpeed ZeRO-2: stuck at the end of the first epoch", "deepspeed_init_hang"),  # past its first step
    ("FSDP job is stuck while wrapping the generator, real_score and fake_score models", "collective_mismatch"),
])
def test_a_later_part_of_the_run_or_another_meaning_of_a_word_rules_the_stage_out(text: str, kind: str) -> None:
    found = hang_stage_named(text)
    assert found is None or found[0].kind != kind, found[0].kind


def test_loss_lines_before_a_hang_are_progress_and_a_stuck_loss_is_no_hang() -> None:
    progress = ("Fine-tuning on 8 GPUs gets stuck at the end of the first epoch, no error.\n"
                "{'loss': 0.0138, 'learning_rate': 6.9e-05, 'epoch': 0.97}\n{'loss': 0.0135, 'epoch': 0.98}")
    found = hang_stage_named(progress, staged=False)
    assert found is not None and found[0].kind == "collective_timeout", found
    assert hang_stage_named("Training with DDP: the loss is stuck at 0.69 and never goes down", staged=False) is None


def test_an_environment_listing_names_no_absent_package() -> None:
    kept = without_absent_packages(ENV_LISTING)
    assert "DeepSpeed" not in kept and "PyTorch version (GPU?): 2.6.0+cu124" in kept and "Accelerate version" in kept


@pytest.mark.parametrize(("text", "hangs"), [
    ("the program often stops at an iteration with no error and stops outputting", True),
    ("训练到一半不再输出日志，GPU 利用率为 0", True),
    ("training stopped at epoch 3 with an error", False),
    ("I stopped the job at step 100 to change the learning rate", False),
])
def test_a_run_that_stops_printing_is_a_hang(text: str, hangs: bool) -> None:
    assert (HANG_WORDS.search(text) is not None) is hangs


@pytest.mark.parametrize(("text", "kind"), [
    ("Training stuck while sharding the 14B model with FSDP, then the process exited with no error message", 
     "quiet_rank_exit"),
    ("多卡训练跑着跑着进程直接退出了，没有任何报错", "quiet_rank_exit"),
    ("训练内存泄漏：占用的内存（而非显存）从 7G 涨到 50G", "host_oom"),
    ("CPU memory keeps growing every epoch until the node swaps", "host_oom"),
])
def test_the_asker_states_the_kind(text: str, kind: str) -> None:
    found = stated_kind(text)
    assert found is not None and found[0] == kind, found


@pytest.mark.parametrize("text", [
    "GPU内存一直增长，最后 CUDA out of memory",  # GPU memory, in other words
    "the job finished without any error, but the accuracy is low",  # finished, not exited early
])
def test_words_that_only_look_like_a_stated_kind_state_none(text: str) -> None:
    found = stated_kind(text)
    assert found is None or found[0] not in ("host_oom", "quiet_rank_exit"), found


@pytest.mark.parametrize("text", [
    "Fine-tuning Mixtral-8x7B with DeepSpeed ZeRO-3 hangs at the first forward",
    "使用 deepspeed zero3 训练 Qwen3-30B-A3B 时进度条卡住不动",
    "MoE 模型开启 ZeRO3 之后训练在前向计算卡住",
    "Qwen2-57B-A14B training is stuck\n" + "swift sft --lora_rank 8 \\\n" * 60 + "--deepspeed zero3",  # lines apart
])
def test_a_mixture_of_experts_model_under_zero3_calls_for_its_moe_block_as_a_leaf_module(text: str) -> None:
    found = hang_stage_named(text)
    assert found is not None and (found[0].kind, found[2]) == ("collective_mismatch", "set_z3_leaf_modules"), found
    assert len(found[1]) <= 83, found[1]  # the reason quoted is the two ends of a long match, on one line


@pytest.mark.parametrize("text", [
    "Mixtral inference with vLLM is slow",  # no hang
    "DeepSpeed ZeRO-3 training of Llama-3-8B hangs at the first forward",  # no MoE model
])
def test_no_moe_model_or_no_hang_is_not_that_stage(text: str) -> None:
    found = hang_stage_named(text)
    assert found is None or found[2] != "set_z3_leaf_modules", found
