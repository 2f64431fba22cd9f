"""A vLLM engine that runs out of CUDA memory outside its KV-cache reservation (a torch OOM while serving) is not given
a larger gpu_memory_utilization first: the runbook's fix that shrinks the other reservations (fewer sequences, eager
mode) leads (data/kinds.json moments), while a KV-cache message still gets the larger share."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runbooks.catalog import runbooks
from runbooks.registry import moment_fix

pytestmark = pytest.mark.usefixtures("use_shared_index")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_moments_fix_is_one_of_the_runbooks_own_fixes(lang: str) -> None:
    moment = moment_fix("vllm_kv_cache", "vLLM serving: torch.OutOfMemoryError: CUDA out of memory")
    assert moment is not None
    fixes = runbooks()[("vllm_kv_cache", lang)].items["fixes"]
    assert [i for i, item in enumerate(fixes) if moment[1] in "\n".join([item.text, *item.code])] == [4]


@pytest.mark.parametrize("question", [
    "推理的时候vllm报 CUDA out of memory，我已经设置了 gpu_memory_utilization=0.7",
    "vllm serve crashes with torch.OutOfMemoryError: CUDA out of memory while serving long prompts, "
    "gpu_memory_utilization 0.9",
])
def test_a_torch_oom_in_vllm_leads_with_fewer_sequences_not_a_larger_share(cli: Any, question: str) -> None:
    done = cli("ask", "--json", "--no-probes", question)
    assert done.returncode == 0, done.stderr[-600:]
    answer = json.loads(done.stdout)
    assert answer["lead"]["kind"] == "vllm_kv_cache"
    assert "--max-num-seqs" in answer["verdict"]["fix"]
    assert "0.95" not in answer["verdict"]["fix"]


def test_a_kv_cache_message_still_gets_the_larger_share(cli: Any) -> None:
    done = cli("ask", "--json", "--no-probes", "ValueError: No available memory for the cache blocks. Try increasing "
               "`gpu_memory_utilization` when initializing the engine.")
    assert done.returncode == 0, done.stderr[-600:]
    assert "--gpu-memory-utilization 0.95" in json.loads(done.stdout)["verdict"]["fix"]
