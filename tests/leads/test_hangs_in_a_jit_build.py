"""Issue 36 point 4 / issue 37: a job that hangs in the JIT build of its compiled ops (torch.utils.cpp_extension
waits on the build folder's lock after 'Using ... as PyTorch extensions root...'; the asker says the compile never
ends) is op_build_failure, and its first fix removes the killed build's folder. Real tables (runbooks/data)."""

from __future__ import annotations

from typing import Any

import pytest

from runbooks.choose import hang_stage_named
from tests.clikit import ask_json, lead_kind


@pytest.mark.parametrize("text", [
    "It got stuck at `from op import fused_leaky_relu`; the compiling process won't finish, it keeps running",
    "Using /root/.cache/torch_extensions/py311_cu121 as PyTorch extensions root...\n(hangs here forever)",
    "训练卡住了，编译算子一直不结束",
])
def test_a_hang_in_the_jit_build_is_the_op_build_and_its_lock(text: str) -> None:
    found = hang_stage_named(text)
    assert found is not None and found[0].kind == "op_build_failure", found and found[0].kind
    assert found[2] == "rm -r ~/.cache/torch_extensions"


def test_a_hang_after_the_build_finished_is_not_the_build() -> None:
    found = hang_stage_named("the compile finished after 3 minutes, then training hangs at step 200 on 8 GPUs")
    assert found is None or found[0].kind != "op_build_failure", found[0].kind


@pytest.mark.usefixtures("use_shared_index")
def test_ask_leads_a_hang_in_the_jit_build_with_removing_the_killed_builds_folder(cli: Any) -> None:
    answer = ask_json(cli, "Get stuck at `from op import FusedLeakyReLU`\nIt ran fine for months; now the compiling "
                           "process won't finish (it keeps running) and I pressed ctrl-c")
    assert lead_kind(answer) == "op_build_failure", answer["lead"]
    assert "torch_extensions" in answer["answer"].split("Fixes")[0]
