"""`ask` as a user runs it: the --json schema, no-match, stale-advice correction, logs and stdin."""

from __future__ import annotations

import json
import re

import pytest
from clikit import documents

pytestmark = pytest.mark.usefixtures("use_shared_index")

SM120 = "RTX 5090 training dies: CUDA capability sm_120 is not compatible with the current PyTorch install. Fix?"


def _answer(result) -> dict:
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1, "--json prints exactly one JSON object"
    return json.loads(lines[0])


def test_json_schema_and_stale_advice_correction(cli):
    answer = _answer(cli("ask", "--json", "--no-probes", SM120))
    assert {"question", "answer", "citations", "findings", "no_match", "backend", "timings_ms"} <= set(answer)
    assert answer["question"] == SM120
    assert answer["backend"] == "offline"
    assert answer["no_match"] is False
    assert 0.5 <= answer["confidence"] <= 1.0
    assert answer["findings"] == []
    assert isinstance(answer["timings_ms"], dict) and answer["timings_ms"]
    assert all(isinstance(v, int | float) and v >= 0 for v in answer["timings_ms"].values())

    citations = answer["citations"]
    assert 1 <= len(citations) <= 5
    assert [c["n"] for c in citations] == list(range(1, len(citations) + 1))
    for c in citations:
        assert {"n", "source", "section", "chunk_id", "score"} <= set(c)
        assert c["source"].startswith("corpus/") and c["section"] and re.fullmatch(r"[0-9a-f]{16}", c["chunk_id"])
        assert isinstance(c["score"], float)
    assert [c["score"] for c in citations] == sorted((c["score"] for c in citations), reverse=True)
    markers = {int(n) for n in re.findall(r"\[(\d+)\]", answer["answer"])}
    assert markers and markers <= {c["n"] for c in citations}, "every [n] refers to a citation"
    assert citations[0]["source"] == "corpus/runbooks/en/arch_mismatch.md"  # traindoc's runbook leads
    assert documents(citations)[0]["source"].endswith("000_a1161a68fffab229.txt")  # then the seed that answers

    body = answer["answer"]
    assert "cu128" in body
    advice = body.split("### What not to do")[0]  # what not to do names the stale wheels on purpose
    first_fix = advice.split("### Fixes", 1)[1].split("\n2. ", 1)[0]
    assert "whl/cu128" in first_fix, "a GPU newer than the build gets a build with its kernels first"
    assert not re.search(r"whl/cu12[0-5]\b", advice), "no stale cu12x wheel index is recommended"
    assert "cu124" not in advice


def test_a_gated_repository_is_answered_by_the_hub_runbook_alone_never_twice(cli):
    """A family the question shows (gated Hub access) weighs only the chunks a search covers: the runbook leads once
    and is not also found among the documents (it was cited as [1] and again as [2])."""
    answer = _answer(cli("ask", "--json", "--no-probes",
                         "from_pretrained raises 401 Unauthorized because the Hugging Face repo is gated; how do I get access?"))
    sources = [c["source"] for c in answer["citations"]]
    assert sources[:1] == ["corpus/runbooks/en/hf_hub_access.md"] and sources.count(sources[0]) == 1, sources


@pytest.mark.parametrize(
    "question",
    [
        "torch_xla training on a Cloud TPU v4 pod stops at start-up: no XLA devices were found. What now?",
        "Which learning-rate warmup should I use for ViT pretraining on ImageNet?",
    ],
    ids=["tpu", "lr-warmup"],
)
def test_unanswerable_question_is_no_match_without_citations(cli, question):
    answer = _answer(cli("ask", "--json", "--no-probes", question))
    assert answer["no_match"] is True
    assert answer["citations"] == []
    assert "No match" in answer["answer"]
    assert "### Fixes" not in answer["answer"]
    assert "What to collect next" in answer["answer"], "a no_match answer still says what would help"
    assert 0.0 <= answer["confidence"] < 0.5


NOISE = "\n".join(
    f"[2025-03-0{i % 9 + 1} 10:{i % 60:02d}:00] step {i} | loss {2.5 - i / 1000:.4f} | lr 3.0e-4 | tokens/s 51234"
    for i in range(400)
)
PORT_LINE = ("RuntimeError: The server socket has failed to listen on any local network address. "
             "port: 29500, useIPv6: 0, code: -98, name: EADDRINUSE, message: Address already in use")


def test_log_file_error_lines_drive_the_search(cli, tmp_path):
    log = tmp_path / "train.log"
    log.write_text(NOISE[: len(NOISE) // 2] + "\n" + PORT_LINE + "\n" + NOISE[len(NOISE) // 2:] + "\n",
                   encoding="utf-8")
    answer = _answer(cli("ask", "--json", "--no-probes", "--log", str(log), "why did the job crash"))
    assert answer["no_match"] is False
    assert answer["citations"][0]["source"] == "corpus/runbooks/en/port_in_use.md"
    top = documents(answer["citations"])[0]
    assert top["source"].endswith("002_8a84ca4f82c44780.txt")
    assert "端口" in top["section"], top["section"]  # the port-in-use section
    assert "server socket has failed to listen" in answer["answer"], "the error line is shown back"


def test_piped_log_is_read_from_stdin(cli):
    oom = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
           "capacity of 79.19 GiB of which 1.02 GiB is free.")
    piped = NOISE + "\nTraceback (most recent call last):\n  File \"train.py\", line 12, in <module>\n" \
        "    loss.backward()\n" + oom + "\n"
    answer = _answer(cli("ask", "--json", "--no-probes", "why did it crash", input=piped))
    assert answer["question"] == "why did it crash"
    assert answer["no_match"] is False
    sections = " ".join(c["section"] for c in answer["citations"][:2])
    assert re.search(r"显存|OOM|out of memory|内存不足", sections, re.I), sections
    assert "CUDA out of memory" in answer["answer"]


def test_plain_output_renders_answer_and_sources(cli):
    result = cli("ask", "--no-probes", "--full", "torchrun: Address already in use on port 29500")
    assert result.returncode == 0, result.stderr
    assert "Sources" in result.stdout
    assert re.search(r"^  \[1\] \S", result.stdout, re.M), "sources listed by number"
    assert "corpus/0" not in result.stdout, "by their readable titles, not hash-named files"
    last = result.stdout.rstrip().splitlines()[-2:]  # the summary: its command on a line of its own when long
    assert any(line.startswith("Summary: ") for line in last), "the answer's summary ends it"
    assert "Port Already in Use" in result.stdout, "the seed's section on the port, by its (English) title"
