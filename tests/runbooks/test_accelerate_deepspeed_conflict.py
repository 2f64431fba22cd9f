"""accelerate refusing how its own config, the DeepSpeed JSON and the code are combined is its own failure (runbook
accelerate_deepspeed_conflict): every line shape accelerate (and transformers' Zero-3 guard) prints for it picks the
runbook, alone or as a traceback's last line, while DeepSpeed's own validation of the JSON, the Trainer's
TrainingArguments mismatch and DeepSpeed's batch assertion keep their runbooks. The lines are the ones accelerate
main (1.15.0.dev0) raised when its DeepSpeedPlugin was driven on CPU; the hidden-size numbers the runbook writes in
place of "auto" are the ones accelerate computes."""

from __future__ import annotations

import json
import re

import pytest
from runbook_messages import assert_a_line_per_message, assert_picks

from runbooks.catalog import runbooks
from runbooks.choose import for_lines

KIND = "accelerate_deepspeed_conflict"
SITE = "/opt/venv/lib/python3.11/site-packages"

# One real-shaped line per message in the runbook's front matter (the same order), as accelerate prints it.
LINES = [
    "ValueError: When using `deepspeed_config_file`, the following accelerate config variables will be ignored: "
    "['gradient_accumulation_steps', 'gradient_clipping', 'zero_stage', 'offload_optimizer_device', "
    "'offload_param_device', 'offload_param_nvme_path', 'offload_optimizer_nvme_path', 'zero3_save_16bit_model', "
    "'mixed_precision'].",
    "[rank0]: ValueError: You cannot specify an optimizer in the config file and in the code at the same time. Please "
    "remove the optimizer from the config file or create `accelerate.utils.DummyOptim` in the code.",
    "ValueError: You cannot specify a scheduler in the config file and in the code at the same time. Please remove the "
    "scheduler from the config file or create `accelerate.utils.DummyScheduler` in the code.",
    "ValueError: You cannot create a `DummyOptim` without specifying an optimizer in the config file.",
    "ValueError: When using DeepSpeed, `accelerate.prepare()` requires you to pass at least one of training or "
    "evaluation dataloaders with `batch_size` attribute returning an integer value or alternatively set an integer "
    "value in `train_micro_batch_size_per_gpu` in the deepspeed config file or assign integer value to "
    "`AcceleratorState().deepspeed_plugin.deepspeed_config['train_micro_batch_size_per_gpu']`.",
    "ValueError: Can find neither `model.config.hidden_size` nor `model.config.hidden_sizes`, therefore it's not "
    "possible to automatically fill out the following `auto` entries in the DeepSpeed config file: "
    "['zero_optimization.reduce_bucket_size']. You can fix that by replacing `auto` values for these keys with an "
    "integer value of your choice.",
    "ValueError: `optimizer.params.betas` not found in kwargs. Please specify `optimizer.params.betas` without `auto` "
    "(set to correct value) in the DeepSpeed config file or pass it in kwargs.",
    "ValueError: `--mixed_precision` arg cannot be set to `fp16` when `bf16` is set in the DeepSpeed config file.",
    "ValueError: Model was not initialized with `Zero-3` despite being configured for DeepSpeed Zero-3. Please "
    "re-initialize your model via `Model.from_pretrained(...)` or `Model.from_config(...)` after creating your "
    "`TrainingArguments`!",
    "07/14/2026 10:02:11 - WARNING - accelerate.accelerator - Gradient accumulation steps mismatch: "
    "GradientAccumulationPlugin has 4, DeepSpeed config has 1. Using DeepSpeed's value.",
]

TRACEBACK = [
    "[rank0]: Traceback (most recent call last):",
    '[rank0]:   File "/work/train.py", line 40, in <module>',
    "[rank0]:     accelerator = Accelerator()",
    f'[rank0]:   File "{SITE}/accelerate/utils/dataclasses.py", line 1270, in __post_init__',
    "[rank0]:     self._deepspeed_config_checks()",
    LINES[0].replace("ValueError", "[rank0]: ValueError"),
]

# DeepSpeed rejecting the JSON, the Trainer's own mismatch check and the batch product: the neighbouring kinds.
NEIGHBOURS = [
    ("pydantic_core._pydantic_core.ValidationError: 1 validation error for DeepSpeedZeroConfig", "deepspeed_config"),
    ("ValueError: Please correct the following DeepSpeed config values that mismatch TrainingArguments values:",
     "deepspeed_config"),
    ("AssertionError: Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
     "gradient_acc_step * world_size 8 != 2 * 1 * 1", "deepspeed_batch_size"),
]


def test_every_message_has_a_line_here_and_both_languages_list_the_same_ones() -> None:
    assert_a_line_per_message(KIND, LINES)


@pytest.mark.parametrize("line", LINES)
def test_each_line_accelerate_prints_picks_the_runbook(line: str) -> None:
    assert_picks(KIND, [line])


def test_a_whole_traceback_ending_in_the_message_picks_it() -> None:
    assert_picks(KIND, TRACEBACK)


@pytest.mark.parametrize(("line", "kind"), NEIGHBOURS)
def test_a_neighbouring_failure_keeps_its_own_runbook(line: str, kind: str) -> None:
    chosen = for_lines([line])
    assert chosen is not None and chosen.kind == kind, (line, chosen and chosen.kind)


def test_the_runbook_names_the_deepspeed_config_difference_in_both_languages() -> None:
    for lang in ("en", "zh"):
        means = runbooks()[(KIND, lang)].parts["means"]
        assert "`deepspeed_config`" in means and "mismatch TrainingArguments" in means


def test_the_numbers_written_in_place_of_auto_are_the_ones_accelerate_computes() -> None:
    fixes = runbooks()[(KIND, "en")].items["fixes"]
    block = next(code for item in fixes for code in item.code if "reduce_bucket_size" in code)
    config = json.loads(re.sub(r"^```\w*\n|```$", "", block.strip()))
    zero, hidden = config["zero_optimization"], 4096
    # accelerate.Accelerator._prepare_deepspeed: the three hidden-size based "auto" entries
    assert zero["reduce_bucket_size"] == hidden * hidden
    assert zero["stage3_prefetch_bucket_size"] == int(0.9 * hidden * hidden)
    assert zero["stage3_param_persistence_threshold"] == 10 * hidden
    # only lr and weight_decay of a DummyOptim are filled: every other optimizer value must be a real one
    assert {k for k, v in config["optimizer"]["params"].items() if v == "auto"} == {"lr", "weight_decay"}
