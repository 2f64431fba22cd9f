"""Input as it really comes (issue 40, point 5): a log saved by PowerShell (UTF-16, CRLF), with or without a byte-order
mark, reads as the text it is; every launcher's rank prefix (and a JSON-lines record's rank field) keeps its rank; a
log still being written is read up to where it was when reading began; a question with no content is refused
before retrieval; a bundle from a newer traindoc is read where its fields are known. Real files throughout."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from agent.intake import NoContent, Received, has_content, intake
from agent.logs import read_log
from jobs.reader import read_job
from tools.bundle import BUNDLE_VERSION, BundleError, parse_bundle

OOM = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of "
       "79.15 GiB of which 1.02 GiB is free.")
RANK3_CRASH = ["Traceback (most recent call last):", '  File "/home/u/train.py", line 35, in <module>',
               "    loss.backward()", OOM]


def _job(prefix: str) -> str:
    """Rank 0 and 1 train, rank 3 dies of OOM, each line under the launcher's ``prefix`` (``{n}``: the rank)."""
    lines = [prefix.format(n=0) + "step 10 loss 2.31", prefix.format(n=1) + "step 10 loss 2.30"]
    return "\n".join(lines + [prefix.format(n=3) + line for line in RANK3_CRASH]) + "\n"


def _root(path: Path) -> tuple[int | None, str]:
    diagnosis = read_log(path).diagnosis
    assert diagnosis is not None and diagnosis.root_cause is not None, path.read_bytes()[:200]
    return diagnosis.root_cause.rank, diagnosis.root_cause.category


# -- encodings ------------------------------------------------------------------------------------------------

ENCODINGS = {
    "utf-16 with BOM (PowerShell >)": lambda text: text.replace("\n", "\r\n").encode("utf-16"),
    "utf-16-le without BOM": lambda text: text.replace("\n", "\r\n").encode("utf-16-le"),
    "utf-16-be without BOM": lambda text: text.replace("\n", "\r\n").encode("utf-16-be"),
    "utf-8 with BOM and CRLF": lambda text: b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode("utf-8"),
    "utf-8 with CRLF": lambda text: text.replace("\n", "\r\n").encode("utf-8"),
}


@pytest.mark.parametrize("encode", ENCODINGS.values(), ids=ENCODINGS.keys())
def test_a_log_in_any_common_encoding_reads_as_text(tmp_path: Path, encode) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(encode(_job("[rank{n}]:")))
    lines = [line.text for line in read_job([log])]
    assert OOM in lines and all("\x00" not in t and "\r" not in t and "\ufeff" not in t for t in lines), lines
    assert _root(log) == (3, "oom")


def test_utf16_on_standard_input_reads_as_text(tmp_path: Path) -> None:
    import io

    stream = io.BufferedReader(io.BytesIO(_job("[rank{n}]:").encode("utf-16")))  # type: ignore[arg-type]
    assert OOM in [line.text for line in read_job([Path("-")], stream)]


def test_a_utf8_log_with_a_nul_hole_is_not_taken_for_utf16(tmp_path: Path) -> None:
    log = tmp_path / "crashed.log"
    log.write_bytes(_job("[rank{n}]:").encode() + b"\x00" * 64 + b"\n[rank3]:after the hole\n")
    assert "after the hole" in [line.text for line in read_job([log])]


# -- rank prefixes --------------------------------------------------------------------------------------------

PREFIXES = {
    "torchrun --tee": "[default{n}]:",
    "c10 global rank": "[rank{n}]:",
    "rank-tagged logger": "[RANK {n}] ",
    "mpirun --tag-output (DeepSpeed MPI)": "[1,{n}]<stderr>:",
    "srun --label": "{n}: ",
    "pdsh then c10": "localhost: [rank{n}]:",
}


@pytest.mark.parametrize("prefix", PREFIXES.values(), ids=PREFIXES.keys())
def test_every_launchers_prefix_keeps_the_rank(tmp_path: Path, prefix: str) -> None:
    log = tmp_path / "job.log"
    log.write_text(_job(prefix), encoding="utf-8")
    parsed = [line for line in read_job([log]) if line.text == OOM]
    assert parsed and (parsed[0].rank == 3 or parsed[0].local_rank == 3), parsed
    assert _root(log) == (3, "oom")


def test_json_lines_keep_their_rank_host_and_message(tmp_path: Path) -> None:
    records = [{"time": f"2026-11-23T02:40:0{i}", "level": "ERROR", "rank": rank, "host": "node-7", "message": text}
               for i, (rank, text) in enumerate([(0, "step 10 loss 2.31"), *[(3, line) for line in RANK3_CRASH]])]
    log = tmp_path / "train.jsonl.log"
    log.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    oom = next(line for line in read_job([log]) if line.text == OOM)
    assert (oom.rank, oom.host, oom.time is not None) == (3, "node-7", True)
    assert _root(log) == (3, "oom")


def test_a_json_line_without_a_message_is_left_as_it_is(tmp_path: Path) -> None:
    log = tmp_path / "metrics.log"
    log.write_text('{"step": 10, "loss": 2.31}\n', encoding="utf-8")
    assert [line.text for line in read_job([log])] == ['{"step": 10, "loss": 2.31}']


# -- a log still being written --------------------------------------------------------------------------------

def test_a_growing_log_is_read_up_to_where_it_was_when_reading_began(tmp_path: Path) -> None:
    log = tmp_path / "live.log"
    log.write_text("".join(f"step {i} loss 2.3\n" for i in range(50_000)), encoding="utf-8")
    lines = read_job([log])
    first = next(lines)
    with log.open("a", encoding="utf-8") as writer:  # the job keeps writing while traindoc reads
        for i in range(50_000, 200_000):
            writer.write(f"step {i} loss 2.3\n")
    rest = list(lines)
    assert first.text == "step 0 loss 2.3" and len(rest) == 49_999 and rest[-1].text == "step 49999 loss 2.3"


# -- a question with no content -------------------------------------------------------------------------------

NO_CONTENT = ["???", "a", "7", "🤔", "\u200b\u200b", "<@U024BE7LH>", "<@U024BE7LH> ?!", "...", "卡", "👍🏽 !"]


@pytest.mark.parametrize("text", NO_CONTENT)
def test_a_question_with_no_content_is_refused_before_retrieval(text: str) -> None:
    assert not has_content(text)
    with pytest.raises(NoContent) as refused:
        intake(Received(text=text, probes=False))
    assert refused.value.exit_code == 2
    assert refused.value.message == ("请提一个问题，或粘贴报错信息" if text == "卡" else "ask a question or paste the error")


@pytest.mark.parametrize("text", ["OOM", "NCCL hang", "为什么卡住", "sm_120", "exit code 137"])
def test_a_short_real_question_is_answered(text: str) -> None:
    assert has_content(text) and intake(Received(text=text, probes=False)).text == text


def test_no_content_beside_a_log_asks_about_the_log(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text(_job("[rank{n}]:"), encoding="utf-8")
    question = intake(Received(text="???", logs=(log,), probes=False))
    assert question.text and "?" not in question.text and question.job is not None


# -- bundles from another version -----------------------------------------------------------------------------

def _bundle(version: int, results: list[dict]) -> bytes:
    return json.dumps({"traindoc_bundle": version, "host": "node-3", "results": results}).encode()


KNOWN = {"probe": "env_vars", "status": "ok", "summary": "nothing odd", "findings": [], "evidence": {}}


def test_a_bundle_from_a_newer_traindoc_is_read_where_its_fields_are_known(caplog: pytest.LogCaptureFixture) -> None:
    future = {"probe": "env_vars", "status": "quarantined", "summary": "a status this version does not know"}
    with caplog.at_level(logging.WARNING):
        parsed = parse_bundle(_bundle(BUNDLE_VERSION + 1, [KNOWN, future, {**KNOWN, "probe": "rdma_counters"}]), "n3.json")
    assert parsed["results"] == [KNOWN]
    notes = [r.getMessage() for r in caplog.records]
    assert any("newer traindoc" in n and "n3.json" in n for n in notes), notes
    assert any("left out 2 results" in n and "rdma_counters" in n for n in notes), notes


def test_one_unknown_probe_leaves_the_rest_of_a_bundle_in(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        parsed = parse_bundle(_bundle(BUNDLE_VERSION, [KNOWN, {**KNOWN, "probe": "quantum_probe"}]), "n3.json")
    assert parsed["results"] == [KNOWN] and "quantum_probe" in caplog.text


@pytest.mark.parametrize("version", [0, -1, "1", True, None])
def test_what_is_no_bundle_version_is_still_refused(version: object) -> None:
    with pytest.raises(BundleError, match="not a traindoc bundle"):
        parse_bundle(json.dumps({"traindoc_bundle": version, "results": []}).encode())


def test_a_current_bundle_that_breaks_its_schema_is_still_refused() -> None:
    with pytest.raises(BundleError, match=r"results\[0\]\.status"):
        parse_bundle(_bundle(BUNDLE_VERSION, [{**KNOWN, "status": "quarantined"}]))
