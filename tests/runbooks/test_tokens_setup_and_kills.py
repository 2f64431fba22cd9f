"""Three kinds named by words that were not read before (issue 36 points 2 and 3, issue 37):

- tiktoken's ``argument 'tokens': 'NoneType' object cannot be interpreted as an integer``: the ids being decoded hold
  ``None`` because the tokenizer has no id for a special token (the first Qwen release leaves pad and EOS unset). It is
  chat_template_format's message, and its fix 7 (print the special ids, set them from ``eod_id``) comes first.
- "CUDA setup failed" is bitsandbytes' own name for its library search (``cuda_setup``): said by the asker beside a
  bitsandbytes frame it states bnb_cuda_setup; without bitsandbytes anywhere it states nothing.
- "the training process was killed" with no other error: the kernel's OOM killer first (host_oom), unless the asker
  says what killed it (a signal, a time limit, themselves); killed while it trains (an epoch, a step), host RAM that
  grew comes first (the DataLoader's workers, fix 2), not the checkpoint loading of fix 1.

The reports are written for these tests; the registry and runbooks are the real ones, end to end on the shared index.
"""

from __future__ import annotations

from typing import Any

import pytest

from runbooks.catalog import runbooks
from runbooks.choose import for_lines
from runbooks.registry import stated_kind
from tests.clikit import ask_json, lead_kind

TIKTOKEN = "TypeError: argument 'tokens': 'NoneType' object cannot be interpreted as an integer"
BNB_FRAME = ('  File "/opt/venv/lib/python3.10/site-packages/bitsandbytes/__init__.py", line 6, in <module>\n'
             "    from . import cuda_setup, utils, research")


def test_the_tiktoken_line_alone_picks_the_tokenizer_runbook_in_both_languages() -> None:
    chosen = for_lines([TIKTOKEN])
    assert chosen is not None and chosen.kind == "chat_template_format"
    for lang in ("en", "zh"):
        book = runbooks()[("chat_template_format", lang)]
        assert any(message in TIKTOKEN for message in book.messages)
        assert "tokenizer.eod_id" in book.body


@pytest.mark.parametrize(("text", "kind"), [
    ("cuda setup failed\n\nTraceback (most recent call last):\n" + BNB_FRAME, "bnb_cuda_setup"),
    ("QLoRA with bnb 4-bit: CUDA Setup failed on my Windows box", "bnb_cuda_setup"),
    ("cuda setup failed after I installed the 12.4 toolkit, nvcc is not found", None),
    ("The training process was killed at 59% of the first epoch, nothing else printed", "host_oom"),
    ("My job got killed after two hours on the cluster", "host_oom"),
    ("训练到第三个 epoch 时进程被杀死了，没有任何报错", "host_oom"),
    ("The job was killed by the scheduler after its time limit", None),
    ("my training process was killed by signal 15 (SIGTERM)", None),
    ("The run is killed by me with Ctrl-C and then resumes from the last checkpoint", None),
])
def test_what_the_asker_says_states_its_kind_or_nothing(text: str, kind: str | None) -> None:
    found = stated_kind(text)
    assert (found[0] if found else None) == kind, found


@pytest.mark.usefixtures("use_shared_index")
@pytest.mark.parametrize(("question", "kind", "fix_words"), [
    ("SFT of Qwen-7B-Chat with LoRA fails while the dataset is printed:\n"
     '  File "tiktoken/core.py", line 254, in decode\n' + TIKTOKEN, "chat_template_format", "tokenizer.eod_id"),
    ("微调 Qwen 报错：\n" + TIKTOKEN, "chat_template_format", "tokenizer.eod_id"),
    ("cuda setup failed\n\nTraceback (most recent call last):\n" + BNB_FRAME, "bnb_cuda_setup", "bitsandbytes"),
    # killed while it trains: host RAM that grew (the DataLoader's workers first); while loading: the checkpoint's copies
    ("The training program was killed during the second epoch on an RTX 4090. I use the default config.", "host_oom",
     "persistent_workers=True"),
    ("My process was killed while loading the checkpoint shards of a 70B model on 8 ranks", "host_oom", "mmap=True"),
    ("训练时内存一直涨，最后被 kill 了", "host_oom", "persistent_workers=True"),  # 训练时: while it trains
    # torchrun's failure summary written on one line: the exit code is read as the job's (SIGKILL, SIGBUS)
    ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: train.py FAILED, exitcode: -9", "host_oom",
     "mmap=True"),
    ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: train.py FAILED, exitcode: -7", "dev_shm",
     "--shm-size"),
])
def test_a_pasted_report_leads_with_it(cli: Any, question: str, kind: str, fix_words: str) -> None:
    answer = ask_json(cli, question)
    assert lead_kind(answer) == kind, answer.get("lead")
    assert fix_words in answer["verdict"]["fix"], answer["verdict"]["fix"]
