"""A full disk is answered for the folder that filled: an Errno 28 whose line names the Hugging Face cache moves the
caches first, one that names the temporary folder moves TMPDIR first, and a checkpoint that cannot be written keeps
fewer checkpoints first (data/kinds.json moments, read on the error's own line: a cache path elsewhere in the
traceback says nothing about which write failed). Every moment of every kind names a fix its runbook has in both
languages."""

from __future__ import annotations

from typing import Any

import pytest
from clikit import ask_json, lead_kind

from runbooks.catalog import runbooks
from runbooks.registry import kinds

pytestmark = pytest.mark.usefixtures("use_shared_index")


def test_every_moment_names_one_fix_of_its_runbook_in_each_language() -> None:
    for name, own in kinds().items():
        for moment in own.moments:
            for lang in ("en", "zh"):
                fixes = runbooks()[(name, lang)].items["fixes"]
                found = [item for item in fixes if moment["fix"] in "\n".join([item.text, *item.code])]
                assert len(found) == 1, (name, lang, moment["fix"])


@pytest.mark.parametrize(("paste", "first"), [
    ("OSError: [Errno 28] No space left on device: "
     "'/root/.cache/huggingface/hub/models--meta-llama--Llama-3.1-8B/blobs/0a1b2c.incomplete'", "export HF_HOME="),
    ("下载数据集时报错 OSError: [Errno 28] No space left on device: '/tmp/tmpk2x9/shard-0001.arrow'", "export TMPDIR="),
    ('  File "/root/.cache/huggingface/modules/transformers_modules/qwen/modeling_qwen.py", line 88, in forward\n'
     "  File \"/opt/conda/lib/python3.11/site-packages/torch/serialization.py\", line 652, in save\n"
     "RuntimeError: [enforce fail at inline_container.cc:595] . PytorchStreamWriter failed writing file data/12: "
     "file write failed\nOSError: [Errno 28] No space left on device", "--save_total_limit"),
])
def test_the_folder_that_filled_gets_its_fix_first(cli: Any, paste: str, first: str) -> None:
    answer = ask_json(cli, paste)
    assert lead_kind(answer) == "disk_full"
    assert first in answer["verdict"]["fix"]
