"""The job's timeline picture (jobs.picture), read back as the XML it is: a 16-rank job on two nodes whose rank 11
ran out of memory (tests/jobs/picturekit.py) is triaged from its own log files, drawn, and its lanes, nodes and marks
are checked; so are a straggler no rank's error names, a log with no times, text from a log that must not run or leak,
and `ask --timeline`."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import picturekit
import pytest
from clikit import run_cli

from jobs.picture import svg_of
from jobs.reader import read_text
from jobs.triage import triage_lines, triage_paths

SVG = "{http://www.w3.org/2000/svg}"


def _svg(paths: list[Path], lang: str = "en") -> ET.Element:
    diagnosis = triage_paths(paths, "why did my job die?")
    assert diagnosis is not None
    text = svg_of(diagnosis, lang)  # type: ignore[arg-type]
    assert text is not None
    return ET.fromstring(text)


def _classes(element: ET.Element) -> set[str]:
    return set(element.get("class", "").split())


def _lanes(root: ET.Element) -> list[ET.Element]:
    return [g for g in root.iter(f"{SVG}g") if "lane" in _classes(g) and g.get("data-rank")]


def _marks(root: ET.Element, kind: str | None = None) -> list[ET.Element]:
    return [e for e in root.iter() if "mark" in _classes(e) and (kind is None or kind in _classes(e))]


def _label(lane: ET.Element) -> str:
    text = next(t for t in lane.iter(f"{SVG}text") if "lane-label" in _classes(t))
    return (text.text or "").strip()


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return picturekit.write_job(tmp_path_factory.mktemp("job16"))


def test_sixteen_ranks_are_sixteen_lanes_grouped_by_node(job: Path) -> None:
    root = _svg([job])
    lanes = _lanes(root)
    assert [int(lane.get("data-rank") or -1) for lane in lanes] == list(range(16))
    assert [_label(lane) for lane in lanes] == [f"rank {r}" for r in range(16)]
    nodes = [g for g in root.iter(f"{SVG}g") if "node" in _classes(g) and g.get("data-node")]
    assert [g.get("data-node") for g in nodes] == ["node-a", "node-b"]
    for node in nodes:
        inside = [int(lane.get("data-rank") or -1) for lane in node.iter(f"{SVG}g") if lane in lanes]
        assert inside == list(picturekit.NODES[node.get("data-node") or ""]), node.get("data-node")
        label = next(t for t in node.iter(f"{SVG}text") if "node-label" in _classes(t))
        assert label.text == node.get("data-node")
    assert root.get("data-ranks") == "16" and root.get("data-nodes") == "2"
    assert "16 ranks on 2 nodes" in (root.findtext(f"{SVG}title") or "")


def test_the_first_failure_is_marked_on_the_rank_that_failed_first(job: Path) -> None:
    root = _svg([job])
    first = _marks(root, "first-failure")
    assert len(first) == 1
    assert first[0].get("data-rank") == str(picturekit.FAILED) and first[0].get("data-category") == "oom"
    assert "OutOfMemoryError" in (first[0].findtext(f"{SVG}title") or "")
    flagged = [lane for lane in _lanes(root) if "first-failure" in _classes(lane)]
    assert [lane.get("data-rank") for lane in flagged] == [str(picturekit.FAILED)]
    assert "rank 11 failed first" in (root.findtext(f"{SVG}desc") or "")


def test_the_consequences_are_greyed_after_the_first_failure(job: Path) -> None:
    root = _svg([job])
    first_at = float(_marks(root, "first-failure")[0].get("data-at") or "nan")
    consequences = _marks(root, "consequence")
    by_rank: dict[str, set[str]] = {}
    for mark in consequences:
        by_rank.setdefault(mark.get("data-rank") or "", set()).add(mark.get("data-category") or "")
        assert float(mark.get("data-at") or "nan") >= first_at
    for rank in range(7):  # node-a's ranks timed out in the all-reduce, then took their processes down
        assert {"collective_timeout", "process_abort"} <= by_rank[str(rank)], rank
    for rank in (8, 9, 10, 12, 13, 14, 15):  # node-b's torchrun stopped them
        assert "killed_by_launcher" in by_rank[str(rank)], rank
    assert not _marks(root, "failure"), "nothing but rank 11 failed of its own accord"
    (grey,) = [r for r in root.iter(f"{SVG}rect") if "after-first-failure" in _classes(r) and r.get("height")
               and float(r.get("height") or 0) > 100]
    first_x = float(_marks(root, "first-failure")[0].get("points", "0,0").split(",")[0])
    assert abs(float(grey.get("x") or "nan") - first_x) < 0.2
    assert float(grey.get("x") or 0) + float(grey.get("width") or 0) > max(
        float(m.get("cx") or 0) for m in consequences)


def test_the_rank_absent_from_the_collective_is_marked(job: Path) -> None:
    root = _svg([job])
    absent = [lane for lane in _lanes(root) if "absent" in _classes(lane)]
    assert [lane.get("data-rank") for lane in absent] == [str(picturekit.QUIET)]
    label = next(t for t in absent[0].iter(f"{SVG}text") if "lane-label" in _classes(t))
    assert "absent from ALLREDUCE SeqNum=5821" in (label.findtext(f"{SVG}title") or "")
    assert any(r.get("fill") == "url(#tl-hatch)" for r in absent[0].iter(f"{SVG}rect"))


def test_one_console_log_draws_the_same_job_in_chinese(tmp_path: Path) -> None:
    root = _svg([picturekit.combined_log(tmp_path / "console.log")], lang="zh")
    lanes = _lanes(root)
    assert [lane.get("data-node") for lane in lanes] == ["node-a"] * 8 + ["node-b"] * 8
    assert [m.get("data-rank") for m in _marks(root, "first-failure")] == [str(picturekit.FAILED)]
    assert "16 个 rank，2 个节点" in (root.findtext(f"{SVG}title") or "")
    assert "rank 11 最先失败" in (root.findtext(f"{SVG}desc") or "")


def test_a_rank_the_others_waited_for_is_marked_without_an_error_of_its_own() -> None:
    lines = "".join(
        f"node-{rank // 2}:{400 + rank}:{400 + rank} [0] NCCL INFO comm 0x5{rank}0 rank {rank} nRanks 4 nNodes 2\n"
        for rank in range(4))
    lines += "".join(
        f"[rank{rank}]:[E0302 10:31:3{rank}.100000 {400 + rank} ProcessGroupNCCL.cpp:632] [Rank {rank}] Watchdog caught "
        f"collective operation timeout: WorkNCCL(SeqNum=77, OpType=BROADCAST, NumelIn=1, NumelOut=1, "
        f"Timeout(ms)=600000) ran for 600100 milliseconds before timing out.\n" for rank in (0, 1, 3))
    diagnosis = triage_lines(read_text(lines), "why is it stuck")
    assert diagnosis is not None and diagnosis.root_cause is not None and diagnosis.root_cause.rank == 2
    root = ET.fromstring(svg_of(diagnosis) or "")
    lane = next(lane for lane in _lanes(root) if lane.get("data-rank") == "2")
    assert {"first-failure", "absent"} <= _classes(lane)
    assert lane.get("data-node") == "node-1"
    assert not _marks(root, "first-failure"), "no line of rank 2's says what it did"
    assert (root.findtext(f"{SVG}desc") or "") == "the others waited for rank 2"
    assert {m.get("data-rank") for m in _marks(root, "consequence")} == {"0", "1", "3"}


def test_a_log_without_times_is_drawn_in_reading_order() -> None:
    lines = ("[default0]:step 3 loss 2.1\n[default1]:Traceback (most recent call last):\n"
             '[default1]:  File "/job/train.py", line 35, in collate\n[default1]:KeyError: \'target\'\n'
             "[default0]:RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer "
             "[127.0.0.1]:4242\n")
    diagnosis = triage_lines(read_text(lines))
    root = ET.fromstring(svg_of(diagnosis) or "")
    assert root.get("data-timed") == "false"
    assert "the logs print no times" in "".join(root.itertext())
    assert [m.get("data-rank") for m in _marks(root, "first-failure")] == ["1"]
    assert [m.get("data-rank") for m in _marks(root, "consequence")] == ["0"]


def test_log_text_is_masked_escaped_and_inert() -> None:
    token = "hf_" + "aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gH"
    lines = (f'[rank1]:Traceback (most recent call last):\n[rank1]:  File "/job/train.py", line 9, in main\n'
             f"[rank1]:ValueError: bad header <script>alert(1)</script> & token={token} \x1b[31m\u202e\n"
             "[rank0]:RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer\n")
    diagnosis = triage_lines(read_text(lines))
    text = svg_of(diagnosis) or ""
    root = ET.fromstring(text)  # well-formed whatever the log held
    assert token not in text
    assert not [e for e in root.iter() if e.tag.split("}")[-1] in ("script", "foreignObject", "a", "image")]
    assert "<script>" not in text and "&lt;script&gt;alert(1)" in text
    assert "\u202e" not in text and "<U+202E>" in "".join(root.itertext())
    assert "http" not in text.replace("http://www.w3.org/2000/svg", "")  # it names nothing to fetch


def test_the_picture_follows_dark_mode_and_scales(job: Path) -> None:
    root = _svg([job])
    assert root.get("width") == "100%" and root.get("viewBox", "").startswith("0 0 ")
    style = root.findtext(f"{SVG}style") or ""
    assert "@media (prefers-color-scheme: dark)" in style
    rules = [line.strip() for line in style.splitlines() if line.strip().startswith(".") or line.strip().startswith("@")]
    assert all(rule.startswith((".traindoc-timeline", "@media")) for rule in rules), "every rule scoped to the picture"


# -- `ask --timeline` -----------------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.usefixtures("use_shared_index")
def test_ask_writes_the_picture_and_answers_as_before(job: Path, tmp_path: Path) -> None:
    out = tmp_path / "job.svg"
    drawn = run_cli("ask", "--no-probes", "--log", str(job), "--timeline", str(out), "why did my job die?")
    assert drawn.returncode == 0, drawn.stderr
    root = ET.parse(out).getroot()
    assert len(_lanes(root)) == 16
    assert [m.get("data-rank") for m in _marks(root, "first-failure")] == ["11"]
    plain = run_cli("ask", "--no-probes", "--log", str(job), "why did my job die?")
    assert plain.returncode == 0 and plain.stdout == drawn.stdout


@pytest.mark.parametrize(("args", "code", "said"), [
    (("--timeline", "{tmp}/x.svg", "why did it crash"), 2, "--timeline draws a job's logs: none was given"),
    (("--log", "{job}", "--timeline", "{tmp}/missing/x.svg", "why"), 1, "cannot write the timeline to"),
    (("--log", "{job}", "--timeline", "{tmp}", "why"), 1, "cannot write the timeline to"),
    (("--log", "{healthy}", "--timeline", "{tmp}/x.svg", "why"), 1, "show no failure, wait or stop"),
])
def test_ask_timeline_without_a_job_or_a_place_to_write_is_one_line(job: Path, tmp_path: Path, args: tuple[str, ...],
                                                                    code: int, said: str) -> None:
    healthy = tmp_path / "healthy.log"
    healthy.write_text("step 1 loss 2.3\nstep 2 loss 2.2\ntraining done\n", encoding="utf-8")
    filled = [a.format(tmp=tmp_path, job=job, healthy=healthy) for a in args]
    result = run_cli("ask", "--no-probes", *filled, env={"TRAINDOC_DATA_DIR": str(tmp_path / "no-index")})
    assert result.returncode == code, result.stderr
    assert said in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and result.stdout == ""
