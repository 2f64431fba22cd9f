"""A vLLM that lacks what was asked of it is its own failure (runbook vllm_unsupported): the model's architecture,
custom model code, LoRA or a quantization for that model or GPU, an engine argument, the in-process model RL weight
sync reaches for, or the version a framework pins. Each line shape vLLM (and TRL's version check) prints for it picks
the runbook, alone or as a traceback's last line; a KV cache that does not fit (vllm_kv_cache) and a vLLM wheel that
does not build (package_build) keep their runbooks. The check that reads a model's architectures runs as written."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from runbook_messages import assert_a_line_per_message, assert_picks

from runbooks.catalog import runbooks
from runbooks.choose import for_lines

KIND = "vllm_unsupported"
SITE = "/opt/venv/lib/python3.12/site-packages"

# One real-shaped line per message in the runbook's front matter (the same order), as vLLM or TRL prints it.
LINES = [
    "ValueError: Model architectures ['DeepseekOCRForCausalLM'] are not supported for now. Supported architectures: "
    "dict_keys(['ApertusForCausalLM', 'AquilaModel', 'AquilaForCausalLM', 'ArceeForCausalLM'])",
    "(APIServer pid=1) ValueError: Model architectures ['Qwen3ForCausalLM'] failed to be inspected. Please check the "
    "logs for more details.",
    "ValueError: Model architecture Phi3SmallForCausalLM was supported in vLLM until v0.9.2, and is not supported "
    "anymore. Please use an older version of vLLM if you want to use this model architecture.",
    "ImportError: Support for Transformers v4 is deprecated and was removed in vLLM v0.24.0. Please upgrade to "
    "Transformers v5: pip install --upgrade transformers",
    "RuntimeError: Failed to load the model config. If the model is a custom model not yet available in the "
    "HuggingFace transformers library, consider setting `trust_remote_code=True` in LLM or using the "
    "`--trust-remote-code` flag in the CLI.",
    "ValueError: Total number of attention heads (40) must be divisible by tensor parallel size (3).",
    "(EngineCore_DP0 pid=2210) ValueError: Gemma3nForConditionalGeneration does not support LoRA yet.",
    "Value error, The quantization method mxfp4 is not supported for the current GPU. Minimum capability: 100. "
    "Current capability: 86. [type=value_error, input_value=ArgsKwargs((), {'model_co...additional_config': {}}), "
    "input_type=ArgsKwargs]",
    "Value error, Sleep mode is not supported on current platform. [type=value_error, input_value=ArgsKwargs((), "
    "{'model': 'Qwen/Qwen3-0.6B'}), input_type=ArgsKwargs]",
    "TypeError: AsyncEngineArgs.__init__() got an unexpected keyword argument 'disable_log_requests'",
    "AttributeError: 'LLMEngine' object has no attribute 'model_executor'",
    f"{SITE}/trl/import_utils.py:120: UserWarning: TRL currently supports vLLM versions from 0.17.0 to 0.25.1. You "
    "have version 0.11.0 installed. We recommend installing a supported version to avoid compatibility issues.",
    "ValueError: Unknown quantization method: bitsandbytes. Must be one of ['awq', 'fp8', 'gptq'].",
    "ValueError: Currently, MiniCPMV only supports versions 2.0, 2.5, 2.6, 4.0. Got version: (4, 5)",
]

TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/work/grpo_train.py", line 212, in _move_model_to_vllm',
    "    llm_model = self.llm.llm_engine.model_executor.driver_worker.model_runner.model",
    "                ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    "AttributeError: 'LLMEngine' object has no attribute 'model_executor'",
]

# The KV cache that does not fit and the wheel that does not build: the neighbouring kinds.
NEIGHBOURS = [
    ("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing "
     "the engine.", "vllm_kv_cache"),
    ("ERROR: Failed to build installable wheels for some pyproject.toml based projects (vllm)", "package_build"),
]


def test_every_message_has_a_line_here_and_both_languages_list_the_same_ones() -> None:
    assert_a_line_per_message(KIND, LINES)


@pytest.mark.parametrize("line", LINES)
def test_each_line_vllm_prints_picks_the_runbook(line: str) -> None:
    assert_picks(KIND, [line])


def test_a_whole_traceback_ending_in_the_message_picks_it() -> None:
    assert_picks(KIND, TRACEBACK)


@pytest.mark.parametrize(("line", "kind"), NEIGHBOURS)
def test_a_neighbouring_failure_keeps_its_own_runbook(line: str, kind: str) -> None:
    chosen = for_lines([line])
    assert chosen is not None and chosen.kind == kind, (line, chosen and chosen.kind)


def test_no_fix_asks_for_less_kv_cache_memory() -> None:
    fixes = " ".join(item.text + " ".join(item.code) for item in runbooks()[(KIND, "en")].items["fixes"])
    assert "gpu_memory_utilization" not in fixes and "--max-model-len" not in fixes


def test_the_architectures_check_reads_a_model_config_as_written(tmp_path: Path) -> None:
    checks = runbooks()[(KIND, "en")].items["checks"]
    block = next(code for item in checks for code in item.code if "['architectures']" in code)
    command = next(line for line in block.splitlines() if "['architectures']" in line)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"architectures": ["DeepseekOCRForCausalLM"], "model_type": "deepseek_ocr"}))
    argv = shlex.split(command.replace("/path/to/model/config.json", str(config)))
    assert argv[0] == "python"
    done = subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "['DeepseekOCRForCausalLM']"
