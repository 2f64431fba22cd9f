"""The asker's own statement of a kind ("我们的 V100 不支持 bf16") leads where nothing quoted decided, but only in the
asker's words: a library's own log line that reads alike ("Device does not support bfloat16. Set float16
forcefully", between timestamped lines, or inside a fenced block) is output, which states nothing."""

from __future__ import annotations

from typing import Any

import pytest
from clikit import ask_json, lead_kind

from corpus.errorlines import output_lines
from runbooks.registry import stated_kind

pytestmark = pytest.mark.usefixtures("use_shared_index")

LOG = ("2026-11-08 08:40:10,742 - engine - WARNING - Did not find a chat template matching /data/model.\n"
       "Device does not support bfloat16. Set float16 forcefully\n"
       "[TM][WARNING] `max_context_token_num` = 32776.\n")


def test_a_line_between_output_lines_is_output_unless_it_reads_as_prose() -> None:
    lines = ["模型加载报错了，怎么办？", *LOG.splitlines(), "这是不是显卡的问题？", "```", "bf16: true", "```"]
    assert output_lines(lines) == {1, 2, 3, 5, 6, 7}
    assert output_lines(["[Issue] 不支持BF16的显卡运行示例出错", "[INFO] loading"]) == {1}  # a title's tag is no log prefix


def test_the_askers_words_state_a_kind_and_output_does_not() -> None:
    assert stated_kind("我们的 V100 不支持 bf16，怎么微调 qwen2-7b？") is not None
    assert stated_kind("RuntimeError: CUDA runtime error: operation not supported\n" + LOG) is None
    assert stated_kind("启动后报错：\n```\nDevice does not support bfloat16. Set float16 forcefully\n```") is None


def test_a_pasted_notice_does_not_lead_the_answer(cli: Any) -> None:
    question = ("RuntimeError: [TM][ERROR] CUDA runtime error: operation not supported allocator.h:197\n"
                "直接调用 chat.py 会报如下错误，是 CUDA 版本不匹配吗？当前 CUDA 12.1，pytorch 2.2\n" + LOG)
    answer = ask_json(cli, question)
    assert lead_kind(answer) != "bf16_unsupported"


@pytest.mark.parametrize(("text", "stated"), [
    ("[Bug] V100 cannot perform full fine-tuning of BF16 models", True),
    ("我的 T4 无法使用 bf16 训练，怎么改？", True),
    ("V100 cannot load the model, bf16 weights are 30 GB", False),  # the GPU cannot load it: no bf16 statement
    ("my V100 runs bf16 fine but the loss is nan", False),
])
def test_a_gpu_without_bf16_that_cannot_run_it_states_the_kind(text: str, stated: bool) -> None:
    found = stated_kind(text)
    assert (found is not None and found[0] == "bf16_unsupported") is stated, found
