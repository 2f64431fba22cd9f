"""`ask --batch` (the scoring interface) and `traindoc eval`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from clikit import ROOT

pytestmark = pytest.mark.usefixtures("use_shared_index")

SCORE = ROOT.parent / "shared" / "eval" / "score.py"


def test_batch_answers_every_line_in_order_and_reports_bad_lines(cli, tmp_path):
    batch = tmp_path / "cases.jsonl"
    batch.write_text(
        "\n".join([
            json.dumps({"id": "port", "query": "torchrun: Address already in use on port 29500"}),
            "{this is not json",
            json.dumps({"id": "oom", "query": "训练时 CUDA out of memory 显存不足"}, ensure_ascii=False),
            json.dumps({"id": "no-query"}),
            json.dumps({"id": 7, "query": "NCCL timeout in all_reduce after 600 seconds"}),
        ]) + "\n",
        encoding="utf-8",
    )
    result = cli("ask", "--batch", str(batch), "--json", "--no-probes")
    assert result.returncode == 1, "a malformed line makes the run fail"
    assert "Traceback" not in result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]  # every stdout line is JSON
    assert len(rows) == 5
    assert [r["id"] for r in rows] == ["port", None, "oom", "no-query", "7"]

    assert rows[1]["line"] == 2 and rows[1]["error"] and "answer" not in rows[1]
    assert rows[3]["line"] == 4 and "query" in rows[3]["error"]
    for row in (rows[0], rows[2], rows[4]):
        assert row["citations"] and row["no_match"] is False and "[1]" in row["answer"]
    assert rows[2]["question"] == "训练时 CUDA out of memory 显存不足"
    skipped = [line for line in result.stderr.splitlines() if "skipped" in line]
    assert len(skipped) == 2 and ":2:" in skipped[0] and ":4:" in skipped[1]


def test_a_batch_line_with_no_question_in_it_is_its_own_error_and_the_rest_answered(cli, tmp_path):
    batch = tmp_path / "cases.jsonl"
    batch.write_text("\n".join(json.dumps({"id": i, "query": q}, ensure_ascii=False) for i, q in
                               [("dots", "???"), ("oom", "CUDA out of memory with ZeRO-3"), ("emoji", "🤔")]) + "\n",
                     encoding="utf-8")
    result = cli("ask", "--batch", str(batch), "--json", "--no-probes")
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["id"] for r in rows] == ["dots", "oom", "emoji"] and result.returncode == 1
    assert rows[0]["error"] == rows[2]["error"] == "ask a question or paste the error"  # never a confident runbook
    assert rows[1]["citations"] and rows[1]["no_match"] is False


def test_batch_refuses_a_question_alongside(cli, tmp_path):
    batch = tmp_path / "cases.jsonl"
    batch.write_text(json.dumps({"id": "a", "query": "nccl hang"}) + "\n", encoding="utf-8")
    result = cli("ask", "--batch", str(batch), "why")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("ask: error:") and len(result.stderr.strip().splitlines()) == 1


@pytest.mark.skipif(not SCORE.is_file(), reason="../shared/eval is not checked out next to the project")
def test_shared_score_script_runs_against_the_batch_interface():
    result = subprocess.run([sys.executable, str(SCORE), "--quick"], capture_output=True, text=True, cwd=ROOT,
                            stdin=subprocess.DEVNULL, timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "could not get answers" not in result.stdout
    assert "without an answer" not in result.stdout
    assert "R@1" in result.stdout and "negatives" in result.stdout


EVAL_CASES = [
    {"id": "port", "query": "torchrun cannot bind its rendezvous port: Address already in use", "lang": "en",
     "gold": [{"file": "002_8a84ca4f82c44780.txt", "heading": "错误2: 端口被占用"},
              {"file": "002_8a84ca4f82c44780.txt", "heading": "2. 检查端口占用"}]},
    {"id": "blackwell", "query": "RTX 5090 上 PyTorch 报 sm_120 不兼容", "lang": "zh",
     "gold": [{"file": "000_a1161a68fffab229.txt", "heading": "错误1: CUDA兼容性问题"}]},
    {"id": "oom", "query": "CUDA out of memory when the batch size is large", "lang": "en",
     "gold": [{"file": "004_f7d4acab9feaf887.txt", "heading": "显存溢出"},
              {"file": "001_8c5ded5e8229fdf4.txt", "heading": "CUDA out of memory"},
              {"file": "002_8a84ca4f82c44780.txt", "heading": "GPU内存不足"}]},
    {"id": "tpu", "query": "Cloud TPU v5e: torch_xla cannot see any XLA device", "gold": []},
]


@pytest.fixture
def eval_cases(tmp_path) -> Path:
    path = tmp_path / "eval.jsonl"
    path.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in EVAL_CASES), encoding="utf-8")
    return path


def test_eval_prints_a_row_per_retrieval_mode(cli, eval_cases):
    result = cli("traindoc", "eval", str(eval_cases))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "4 cases, 3 answerable"
    rows = {line.split()[0]: line.split()[1:] for line in lines if line.split() and
            line.split()[0] in ("hybrid", "bm25", "dense")}
    assert set(rows) == {"hybrid", "bm25", "dense"}
    assert all(len(values) == 6 for values in rows.values()), rows  # R@1 R@3 R@5 neg falseNM ms/case
    assert float(rows["hybrid"][2]) == 1.0, "hybrid finds every answerable case in its top 5"


def test_eval_json_report(cli, eval_cases):
    result = cli("traindoc", "eval", str(eval_cases), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["cases"] == 4 and report["answerable"] == 3
    assert set(report["modes"]) == {"hybrid", "bm25", "dense"}
    hybrid = report["modes"]["hybrid"]
    assert hybrid["R@5"] == 1.0 and hybrid["negatives"] == 1.0 and hybrid["false_no_match"] == 0
    assert set(hybrid["by_lang"]) == {"en", "zh"}
    for mode in report["modes"].values():
        assert 0.0 <= mode["R@1"] <= mode["R@3"] <= mode["R@5"] <= 1.0


CV_CASES = EVAL_CASES + [
    {"id": "nan", "query": "loss becomes nan after a few hundred steps with fp16", "lang": "en",
     "gold": [{"file": "004_f7d4acab9feaf887.txt", "heading": "NaN"}]},
    {"id": "mps", "query": "RuntimeError: MPS backend out of memory on an Apple M2", "gold": []},
]


def test_eval_cross_validation_scores_held_out_folds_beside_the_baselines(cli, tmp_path):
    path = tmp_path / "cv.jsonl"
    path.write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in CV_CASES), encoding="utf-8")
    result = cli("traindoc", "eval", "--cv", "2", str(path), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["k"] == 2 and report["cases"] == 6 and report["answerable"] == 4
    assert set(report["modes"]) == {"hybrid", "hybrid, unseen", "bm25", "dense"}
    for figures in report["modes"].values():
        assert len(figures["folds"]) == 2 and {"mean", "worst", "pooled"} <= set(figures)
        assert figures["worst"]["R@3"] <= figures["mean"]["R@3"] <= 1.0
    text = cli("traindoc", "eval", "--cv", "2", str(path))
    assert text.returncode == 0 and "hybrid worst" in text.stdout and "bm25 mean" in text.stdout
    refused = cli("traindoc", "eval", "--cv", "1", str(path))
    assert refused.returncode == 1 and "at least 2 folds" in refused.stderr


def test_eval_rejects_a_malformed_cases_file(cli, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"}\n', encoding="utf-8")
    result = cli("traindoc", "eval", str(bad))
    assert result.returncode == 1
    assert result.stderr.strip() == f'traindoc: error: {bad}:1: not an eval case: no "query"'


def test_a_batch_line_that_is_not_utf8_or_not_json_is_reported_by_number_and_the_rest_answered(cli, tmp_path):
    """Every way a line can fail to be a question costs that line only: one stderr line with its number, an
    {"id", "line", "error"} row in its place, and exit 1 at the end."""
    good = json.dumps({"id": "oom", "query": "CUDA out of memory when the batch size is large"}).encode()
    lines = [
        good,
        b'{"id": "latin1", "query": "NCCL timeout caf\xe9"}',  # not UTF-8
        b"{this is not json",
        b"[" * 50_000 + b"]" * 50_000,  # nested past Python's recursion limit
        b'{"id": ' + b"9" * 5000 + b', "query": "NCCL timeout"}',  # past Python's int digit limit
        b'{"id": "nan", "query": NaN}',  # a query that is not text
        json.dumps({"id": "lone", "query": "NCCL timeout \ud800 in all_reduce"}).encode(),  # a lone surrogate
        json.dumps({"id": "port", "query": "torchrun: Address already in use on port 29500"}).encode(),
    ]
    batch = tmp_path / "cases.jsonl"
    batch.write_bytes(b"\n".join(lines) + b"\n")
    result = cli("ask", "--batch", str(batch), "--json", "--no-probes")
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r.get("line") for r in rows] == [None, 2, 3, 4, 5, 6, None, None]
    assert [r["id"] for r in rows] == ["oom", None, None, None, None, "nan", "lone", "port"]
    for row in (rows[0], rows[6], rows[7]):
        assert row["citations"] and "answer" in row
    assert rows[6]["question"] == "NCCL timeout \\ud800 in all_reduce"  # kept, as an escape
    assert "not valid UTF-8" in rows[1]["error"] and "nested too deeply" in rows[3]["error"]
    skipped = [line for line in result.stderr.splitlines() if "skipped" in line]
    assert [line.split(":")[2] for line in skipped] == ["2", "3", "4", "5", "6"], result.stderr
    assert all(len(line) < 300 for line in skipped), "a 5,000-digit line is not echoed"
    noted = [line for line in result.stderr.splitlines() if ":7: note:" in line]
    assert len(noted) == 1, result.stderr
