"""A hang answered in the asker's language: every sentence a stack snapshot, a Flight Recorder finding or a
launcher stuck in its rendezvous can produce has its Chinese beside it, with the same commands, environment
variables, file:line and function names. Stacks built by hand for each verdict; one real hung 3-rank job
(CPU/gloo) read by `traindoc hang --lang zh`, by the locale, and by `ask` with a Chinese question."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from hangkit import HungJob, line_of

from common.language import CJK
from jobs import hang_wording, procs, stacks
from jobs.flight_recorder import FrFinding, describe
from jobs.hang import RankStack, _no_workers, analyse_stacks, merge_flight_recorder
from jobs.pyspy import Frame, classify
from jobs.render import diagnosis_markdown
from traindoc_cli.hang import lang_of

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

SITE = "/venv/lib/python3.11/site-packages/"
C10D = SITE + "torch/distributed/distributed_c10d.py"
BARRIER = line_of("dist.barrier()  # straggler")
SLEEP = line_of("time.sleep(LIFETIME_S)  # straggler")
LOST = "process 11 exited before its stack could be read"  # py-spy's error, quoted as printed

# What must reach the Chinese unchanged: code spans, VAR=value, --flags, file:line, C++ names, dotted calls.
VERBATIM = re.compile(r"`[^`]+`|\b[A-Z][A-Z0-9_]+=[^\s,;)（）]+|(?<![\w-])--[a-z][a-z-]*|\b[\w.]+\.py:\d+|\b\w+::\w+|"
                      r"\b(?:dist|torch)\.[\w.]+(?:\(\))?")
# The English templates' own words: none may be left in a Chinese sentence.
ENGLISH = ("wait in", "waits in", " is in ", " are in ", "stack not read", "only wait", "has not", "have not",
           "every rank", "cannot tell", "other nodes", "must join", "not here", "may be", "rerun with", "shows which",
           "checks that", "names the first", "full stack", "its log", "still in", "whether", "reachable", "on each",
           "inside", "where DDP", "waiting on the GPU", "no rank", "the job", "can.", "their GPU", "called something",
           "gradient", "a collective", "never joined", "entered", "diverge", "dump ends", "agrees", "started but",
           "enqueued", "runs but", "started no workers", "rendezvous for", "its stack is", "what it does",
           "did not answer", "Flight Recorder:")
PLAIN_RUN = re.compile(r"(?<![\w./:=-])[A-Za-z][a-z']*(?:[ ,]+[A-Za-z][a-z']*){2,}(?![\w/:=(-])")


def _frames(*spec: tuple[str, str, int]) -> tuple[Frame, ...]:
    return tuple(Frame(name, path, line, "native" if line == 0 else classify(path)) for name, path, line in spec)


def _in(collective: str, line: int) -> tuple[Frame, ...]:
    return _frames((collective, C10D, 100), ("train_step", "/job/train.py", line), ("<module>", "/job/train.py", 90))


SHARD = _frames(("load_shard", "/job/train.py", 29), ("main", "/job/train.py", 70))
BACKWARD = _frames(("_engine_run_backward", SITE + "torch/autograd/graph.py", 979),
                   ("backward", SITE + "torch/autograd/__init__.py", 395), ("main", "/job/train.py", 52))
SYNC = _frames(("synchronize", SITE + "torch/cuda/__init__.py", 1000), ("main", "/job/train.py", 19))
FSDP = _frames(("all_gather_into_tensor", C10D, 3900),
               ("foreach_all_gather", SITE + "torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py", 200),
               ("forward", "/job/model.py", 40))
ENGINE = _frames(("_engine_run_backward", SITE + "torch/autograd/graph.py", 979),
                 ("backward", SITE + "torch/autograd/__init__.py", 395),
                 ("backward", SITE + "deepspeed/runtime/engine.py", 2243), ("train", "/job/train.py", 77))
REDUCER = _frames(("pthread_cond_wait", "libc.so.6", 0), ("c10d::Reducer::finalize_backward", "libtorch_cpu.so", 0)) + BACKWARD

# name: (stacks, world size, verdict, what the Chinese must say, besides the English's verbatim pieces)
CASES = {
    "straggler": ([RankStack(0, _in("barrier", 77), pid=10), RankStack(1, SHARD, pid=11), RankStack(2, _in("barrier", 77), pid=12)],
                  3, "straggler", ["rank 0 和 2 在 dist.barrier（train.py:77）中等待", "rank 1 正在执行 load_shard（train.py:29）"]),
    "mismatch": ([RankStack(0, _in("barrier", 77)), RankStack(1, _in("all_reduce", 80)), RankStack(2, _in("barrier", 77))],
                 3, "collective_mismatch", ["rank 1 在 dist.all_reduce（train.py:80）中等待", "相同的顺序"]),
    "network": ([RankStack(r, _in("all_reduce", 40)) for r in range(4)], 4, "network", ["rank 0-3", "没有缺席的 rank"]),
    "remote": ([RankStack(r, _in("all_reduce", 40)) for r in range(4)], 16, "unknown", ["其余 12 个 rank 在其他节点上运行"]),
    "rendezvous": ([RankStack(r, _in("init_process_group", 12)) for r in range(2)], 4, "rendezvous",
                   ["dist.init_process_group（train.py:12）", "WORLD_SIZE 为 4，但 rank 2-3 不在这里"]),
    "unreadable": ([RankStack(0, _in("barrier", 58)), RankStack(1, error=LOST), RankStack(2, _in("barrier", 58))], 3, "unknown",
                   [f"rank 1：未能读取栈（{LOST}）", "可能正是其他 rank 在等待的"]),
    "backward": ([RankStack(r, BACKWARD) for r in range(3)], 3, "unknown",
                 ["backward（DDP 的梯度 all-reduce 在其中等待，train.py:52）", "无法区分"]),
    "gpu": ([RankStack(r, SYNC) for r in range(2)], 2, "unknown", ["CUDA 同步（等待 GPU，train.py:19）", "无法区分"]),
    "gpu_straggler": ([RankStack(0, SYNC), RankStack(1, SHARD, pid=11)], 2, "straggler", ["根本不在 GPU 上"]),
    "no_collective": ([RankStack(0, SHARD), RankStack(1, SHARD)], 2, "unknown", ["没有任何 rank 处于集合通信中"]),
    "fsdp": ([RankStack(0, FSDP), RankStack(1, SHARD, pid=11)], 2, "straggler", ["FSDP 的 dist.all_gather_into_tensor（model.py:40）"]),
    "deepspeed": ([RankStack(0, ENGINE), RankStack(1, SHARD, pid=11)], 2, "straggler",
                  ["backward（DeepSpeed 的梯度 all-reduce 在其中等待，train.py:77）"]),
    "reducer": ([RankStack(0, REDUCER), RankStack(1, SHARD, pid=11)], 2, "straggler",
                ["backward 中 DDP 的梯度 all-reduce（train.py:52）"]),
}


def _english_left(chinese: str, quoted: tuple[str, ...] = ()) -> list[str]:
    """English template words, or a run of three plain English words, in ``chinese`` outside code and quotes."""
    prose = re.sub(r"`[^`]*`", " ", re.sub(r"(?s)```.*?```", " ", chinese))
    for text in quoted:
        prose = prose.replace(text, " ")
    return [s for s in ENGLISH if s in prose] + PLAIN_RUN.findall(prose)


@pytest.mark.parametrize("name", list(CASES))
def test_every_verdict_is_said_in_chinese_with_the_same_commands_and_places(name: str) -> None:
    given, world_size, category, says = CASES[name]
    diagnosis = analyse_stacks(given, world_size=world_size).diagnosis
    root = diagnosis.root_cause
    assert root is not None and root.category == category
    zh = diagnosis.wording["zh"]
    english = {"root": root.summary, "why": diagnosis.why_consequences, "next": "\n".join(diagnosis.next_evidence)}
    assert not CJK.search("".join(english.values())), english  # the English fields stay English
    assert set(zh) >= {key for key, text in english.items() if text}, zh
    for key, text in english.items():
        if not text:
            continue
        assert CJK.search(zh[key]), (key, zh[key])
        missing = [piece for piece in VERBATIM.findall(text) if piece not in zh[key]]
        assert not missing, (key, missing, zh[key])
        assert not _english_left(zh[key], (LOST,)), (key, zh[key])
    lines = zh["next"].splitlines()
    assert len(lines) == len(diagnosis.next_evidence)
    assert all(CJK.search(line) or line == LOST for line in lines), lines
    for phrase in says:
        assert phrase in zh["root"] + zh.get("why", ""), (phrase, zh)
    if diagnosis.symptoms:
        assert zh["symptoms"].count("；") == len(diagnosis.symptoms) - 1 and CJK.search(zh["symptoms"])
    if diagnosis.collective:
        assert [p for p in VERBATIM.findall(diagnosis.collective) if p not in zh["collective"]] == []
        assert not _english_left(zh["collective"]), zh["collective"]
    shown = diagnosis_markdown(diagnosis, "zh")  # the evidence fence and the collective's code span: as printed
    assert zh["root"] in shown and not _english_left(shown, (LOST,)), shown
    assert not CJK.search(diagnosis_markdown(diagnosis, "en"))


def test_every_hint_keeps_its_commands_and_variables() -> None:
    """Each fixed next-evidence hint against its Chinese: the same commands, variables and flags."""
    english = [stacks.FR_HINT, stacks.NCCL_HINT, stacks.DETAIL_HINT, stacks.NATIVE_HINT, stacks.NODES_HINT,
               *stacks.RENDEZVOUS_EVIDENCE]
    for text, chinese in zip(english, hang_wording.items(english), strict=True):
        assert CJK.search(chinese) and chinese != text, text
        assert [p for p in VERBATIM.findall(text) if p not in chinese] == [], (text, chinese)
        assert not _english_left(chinese), chinese


def _finding(**data: object) -> FrFinding:
    return describe({"ranks": [0, 1, 2], "last": [], **data})


def _op(rank: int, name: str, seq: int, state: str) -> dict[str, object]:
    return {"rank": rank, "name": name, "seq": seq, "state": state, "group": "default_pg", "where": "train.py:18"}


BAD = {"name": "nccl:barrier", "seq": 4, "group": "default_pg", "state": "scheduled", "expected_ranks": [0, 1, 2],
       "where": "train.py:18"}
FINDINGS = {
    "missing": _finding(first_bad={**BAD, "missing_ranks": [1]}, last=[_op(1, "nccl:all_reduce", 3, "completed")]),
    "mismatched": _finding(first_bad={**BAD, "mismatched": {"1": "nccl:all_reduce #4 (COLLECTIVE_TYPE_MISMATCH)"}}),
    "bad_alone": _finding(first_bad=BAD),
    "one_scheduled": describe({"ranks": [0], "last": [_op(0, "nccl:all_reduce", 4, "scheduled")]}),
    "all_scheduled": _finding(last=[_op(r, "nccl:all_reduce", 4, "scheduled") for r in range(3)]),
    "started": _finding(last=[_op(r, "nccl:all_reduce", 4, "started" if r else "scheduled") for r in range(3)]),
    "other_state": _finding(last=[_op(0, "nccl:all_reduce", 4, "unknown")]),
    "completed": _finding(last=[_op(r, "nccl:all_reduce", 4, "completed") for r in range(3)]),
}


@pytest.mark.parametrize("name", list(FINDINGS))
def test_every_flight_recorder_finding_is_said_in_chinese(name: str) -> None:
    finding = FINDINGS[name]
    chinese = hang_wording.flight_recorder(finding)
    assert CJK.search(chinese) and not _english_left(chinese), chinese
    for piece in re.findall(r"[\w:]+ #\d+(?: \([\w_]+\))?|train\.py:\d+", finding.summary):
        assert piece in chinese, (piece, chinese)


def test_flight_recorder_joins_the_chinese_as_it_joins_the_english() -> None:
    snapshot = analyse_stacks(CASES["network"][0], world_size=4)
    merge_flight_recorder(snapshot, FINDINGS["missing"])
    diagnosis = snapshot.diagnosis
    root = diagnosis.root_cause
    assert root is not None and (root.category, root.rank) == ("straggler", 1)
    zh = diagnosis.wording["zh"]
    assert zh["root"].endswith("；Flight Recorder：rank 0 和 2 进入了 nccl:barrier #4 (default_pg)；rank 1 从未加入"
                               "（rank 1 最后一次是 nccl:all_reduce #3）"), zh["root"]
    assert hang_wording.FR_HINT not in zh["next"] and len(zh["next"].splitlines()) == len(diagnosis.next_evidence)
    assert zh["symptoms"].startswith("Flight Recorder：") and zh["collective"].endswith("；nccl:barrier #4 (default_pg)")
    assert not _english_left(diagnosis_markdown(diagnosis, "zh"))


def test_a_launcher_waiting_in_its_rendezvous_is_said_in_chinese() -> None:
    options = {"--nnodes": "2", "--master-addr": "10.0.0.1", "--master-port": "29500"}
    launcher = SimpleNamespace(kind="torchrun", pid=100, cmdline="torchrun --nnodes 2 train.py", option=options.get)
    job = SimpleNamespace(launcher=launcher, describe=lambda: "torchrun (pid 100)")
    frames = _frames(("_store_based_barrier", SITE + "torch/distributed/elastic/rendezvous/static_tcp_rendezvous.py", 50))
    diagnosis = _no_workers(job, frames, "node1", "py-spy on node1").diagnosis
    zh = diagnosis.wording["zh"]
    assert zh["root"].startswith("torchrun（pid 100）在运行，但还没有启动任何 worker：它在 10.0.0.1:29500 的 rendezvous 中"
                                 "等待其他节点（--nnodes 2）；它的栈在 _store_based_barrier"), zh["root"]
    assert len(zh["next"].splitlines()) == len(diagnosis.next_evidence) == 3 and not _english_left(zh["next"])


def test_the_locale_picks_the_language_when_no_lang_is_given() -> None:
    assert lang_of(None, {"LANG": "zh_CN.UTF-8"}) == "zh"
    assert lang_of(None, {"LC_ALL": "", "LC_MESSAGES": "zh_TW.UTF-8", "LANG": "en_US.UTF-8"}) == "zh"
    assert lang_of(None, {"LC_ALL": "C.UTF-8", "LANG": "zh_CN.UTF-8"}) == "en"  # LC_ALL wins over LANG
    assert lang_of(None, {}) == "en" and lang_of("en", {"LANG": "zh_CN.UTF-8"}) == "en"
    assert lang_of("zh", {"LC_ALL": "C"}) == "zh"


# -- a real hung job -----------------------------------------------------------------------------------------------

NO_LOCALE = {"LC_ALL": "", "LC_MESSAGES": "", "LANG": "C.UTF-8", "LANGUAGE": ""}


@pytest.fixture(scope="module")
def straggler(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HungJob]:
    """Ranks 0 and 2 in dist.barrier, rank 1 in load_shard."""
    job = HungJob(tmp_path_factory.mktemp("straggler-zh"), lifetime_s=120)
    try:
        job.start()
        yield job
    finally:
        job.stop()


def _chinese_summary() -> str:
    return f"rank 0 和 2 在 dist.barrier（train.py:{BARRIER}）中等待；rank 1 正在执行 load_shard（train.py:{SLEEP}）"


def test_cli_lang_zh_renders_the_hang_in_chinese(straggler: HungJob, cli) -> None:
    result = cli("traindoc", "hang", "--pid", str(straggler.pid), "--lang", "zh", env=NO_LOCALE)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"traindoc hang：torchrun (pid {straggler.pid})，3 个 rank，来源：") and "上的 py-spy" in lines[0]
    assert lines[2] == f"straggler（rank 1，置信度 0.8）：{_chinese_summary()}"
    assert lines[3] == "  原因：rank 0 和 2 只是在等待：集合通信要等每个 rank 都调用之后才会完成，而 rank 1 还没有调用。"
    assert lines[4] == f"  集合通信：dist.barrier（train.py:{BARRIER}）"
    pids = straggler.worker_pids()
    assert any(line.startswith("rank 0、2（pid ") and line.endswith(f"：dist.barrier（train.py:{BARRIER}）") for line in lines)
    assert f"  - rank 1 为什么仍在 load_shard（train.py:{SLEEP}）：它的完整栈（`py-spy dump --pid {pids[1]} --native`）、" \
           "它的日志、它读取的数据或文件系统" in lines
    assert "还需要哪些证据：" in lines and not any(line.startswith(("What would", "  why:", "  collective:")) for line in lines)
    frames = [line for line in lines if line.startswith("    ")]
    assert not _english_left("\n".join(line for line in lines if line not in frames)), result.stdout
    assert straggler.alive()


def test_the_locale_decides_and_json_carries_both_languages(straggler: HungJob, cli) -> None:
    chinese = cli("traindoc", "hang", "--pid", str(straggler.pid), env={**NO_LOCALE, "LANG": "zh_CN.UTF-8"})
    assert chinese.returncode == 0, chinese.stderr
    assert chinese.stdout.splitlines()[2] == f"straggler（rank 1，置信度 0.8）：{_chinese_summary()}"
    english = cli("traindoc", "hang", "--pid", str(straggler.pid), "--json", env={**NO_LOCALE, "LC_ALL": "C"})
    assert english.returncode == 0, english.stderr
    data = json.loads(english.stdout)["diagnosis"]
    assert data["root_cause"]["summary"] == (f"ranks 0 and 2 wait in dist.barrier (train.py:{BARRIER}); "
                                             f"rank 1 is in load_shard (train.py:{SLEEP})")
    assert data["wording"]["zh"]["root"] == _chinese_summary()
    assert data["next_evidence"][1] == stacks.DETAIL_HINT
    assert data["wording"]["zh"]["next"].splitlines()[1] == hang_wording.DETAIL_HINT


def test_ask_in_chinese_about_the_hung_job_leads_with_the_chinese_snapshot(straggler: HungJob,
                                                                           use_shared_index: Path) -> None:
    from clikit import run_cli

    if len(procs.find_jobs()) != 1:
        pytest.skip("another training job runs on this machine: ask would (rightly) not guess which one hangs")
    result = run_cli("ask", "--json", "训练任务卡住了，一直不动，是哪个 rank 的问题？", timeout=120, env=NO_LOCALE)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    root = answer["diagnosis"]["root_cause"]
    assert answer["diagnosis"]["kind"] == "hang" and (root["category"], root["rank"]) == ("straggler", 1)
    assert root["summary"].startswith("ranks 0 and 2 wait in dist.barrier")  # the JSON stays English
    assert answer["answer"].startswith("### 结论\n\n- **原因**：")  # the verdict first (agent.summary), then the detail
    text = answer["answer"][answer["answer"].index("\n### ") + 1:]
    assert text.startswith("### 各个 rank 当前在做什么"), text[:200]
    lead = text[:text.index("###", 5)]
    assert f"**根本原因（straggler，rank 1）**：{_chinese_summary()}" in lead, lead  # bold CommonMark renders
    assert "rank 0 和 2 只是在等待" in lead and "**还需要哪些证据：**" in lead
    assert not _english_left(lead), lead  # the evidence fence and the collective's code span stay as printed
    assert straggler.alive()
