"""Nothing bricks, nothing is lost (issue 40, point 3), as a user meets it at the command line: a team folder with
symlink loops is a warning naming each while its other documents answer (and `ask` keeps answering); an empty path
is refused; `traindoc index --debug` works; a closed or full standard output is a failure with exit 1; a question
with no content is refused in one line; the temporary files a killed run left are removed by the next index run.
The real `ask` and `traindoc` run as subprocesses on a private copy of the session's index."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from clikit import BIN, ROOT
from integration_kit import run

pytestmark = pytest.mark.slow
QUESTION = "why is NCCL hanging"
TEAM_DOC = "# Fabric manager\n\n## Symptoms\n\nnvidia-fabricmanager exits with FM_ERR_PARTITION_LOCKED on node boot.\n"


def _loopy_team(folder: Path) -> Path:
    folder.mkdir()
    (folder / "fabric.md").write_text(TEAM_DOC, encoding="utf-8")
    (folder / "loop1").symlink_to("loop2")
    (folder / "loop2").symlink_to("loop1")
    (folder / "self.md").symlink_to("self.md")
    (folder / "sub").mkdir()
    (folder / "sub" / "up").symlink_to("..")  # a link back up the tree: followed once, never round and round
    return folder


def _one_line(result, prog: str) -> str:
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: error: ") and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def test_symlink_loops_in_a_team_folder_are_warnings_and_every_other_document_answers(index_copy: Path,
                                                                                       tmp_path: Path) -> None:
    team = _loopy_team(tmp_path / "team")
    indexed = run("traindoc", "index", str(team), timeout=600)
    assert indexed.returncode == 0, indexed.stderr
    for name in ("loop1", "loop2", "self.md"):
        assert f"traindoc: warning: skipped {team / name}: a symlink loop" in indexed.stderr, indexed.stderr
    assert "internal error" not in indexed.stderr and "1 added" in indexed.stdout
    asked = run("ask", "--json", "--no-probes", "nvidia-fabricmanager FM_ERR_PARTITION_LOCKED on node boot")
    assert asked.returncode == 0, asked.stderr
    assert str(team / "fabric.md") in [c["source"] for c in asked.json()["citations"]]
    again = run("ask", "--no-probes", QUESTION)  # the folder is remembered: every later question still answers
    assert again.returncode == 0 and "internal error" not in again.stderr, again.stderr


def test_a_symlink_loop_named_in_traindoc_corpus_never_stops_an_answer(index_copy: Path, tmp_path: Path) -> None:
    loop = tmp_path / "corpus-loop"
    loop.symlink_to(loop)
    team = _loopy_team(tmp_path / "team")
    asked = run("ask", "--json", "--no-probes", QUESTION, env={"TRAINDOC_CORPUS": f"{loop}:{team}"}, timeout=600)
    assert asked.returncode == 0 and "internal error" not in asked.stderr, asked.stderr
    assert asked.json()["citations"]


def test_a_symlink_loop_named_to_traindoc_index_is_one_line(index_copy: Path, tmp_path: Path) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert "symlink loop" in _one_line(run("traindoc", "index", str(loop)), "traindoc")


def test_an_empty_path_is_refused_not_read_as_the_current_folder(index_copy: Path) -> None:
    result = run("traindoc", "index", "")
    assert result.returncode == 2 and "an empty path" in _one_line(result, "traindoc")
    assert not (index_copy / "roots.json").exists() or str(ROOT) not in (index_copy / "roots.json").read_text()


def test_index_takes_debug_after_its_name_as_the_errors_advise(index_copy: Path) -> None:
    result = run("traindoc", "index", "--debug", timeout=600)
    assert result.returncode == 0, result.stderr
    assert "unrecognized arguments" not in result.stderr and "unchanged" in result.stdout


def _ask_into(stdout: int | None, *args: str) -> subprocess.CompletedProcess[str]:
    """`ask` with its standard output as given: None closes it (the shell's `>&-`)."""
    return subprocess.run([str(BIN / "ask"), "--no-probes", *args, QUESTION], cwd=ROOT, env=os.environ.copy(),
                          stdin=subprocess.DEVNULL, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=300,
                          check=False, **({"pass_fds": ()} if stdout is not None else {"close_fds": True}))


@pytest.mark.parametrize("json_output", [False, True], ids=["text", "json"])
def test_a_closed_standard_output_is_a_failure(index_copy: Path, json_output: bool) -> None:
    script = f'exec "{BIN / "ask"}" --no-probes {"--json " if json_output else ""}"{QUESTION}" >&-'
    result = subprocess.run(["sh", "-c", script], cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                            timeout=300, check=False)
    assert result.returncode == 1 and "standard output is closed" in _one_line(result, "ask")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
@pytest.mark.parametrize("json_output", [False, True], ids=["text", "json"])
def test_a_full_standard_output_is_a_failure_not_an_internal_error(index_copy: Path, json_output: bool) -> None:
    with open("/dev/full", "w") as full:
        result = _ask_into(full.fileno(), *(["--json"] if json_output else []))
    line = _one_line(result, "ask")
    assert result.returncode == 1 and "cannot write to standard output: No space left on device" in line
    assert "internal error" not in line and "Exception ignored" not in result.stderr


@pytest.mark.parametrize("question", ["???", "a", "🤔", "\u200b\u200b", "<@U024BE7LH>"])
def test_a_question_with_no_content_gets_asked_for_one(index_copy: Path, question: str) -> None:
    result = run("ask", "--no-probes", question)
    assert result.returncode == 2 and _one_line(result, "ask") == "ask: error: ask a question or paste the error"
    assert result.stdout == ""


def test_temporary_files_a_killed_run_left_are_removed_by_the_next_index_run(index_copy: Path) -> None:
    cache = index_copy / "cache"
    cache.mkdir(exist_ok=True)
    left = [index_copy / ".chunks-abc123.pkl", index_copy / ".knowledge-1a2b", index_copy / ".manifest-9z",
            cache / ".emb-x1y2.npz"]
    kept = [index_copy / "notes.txt", index_copy / ".emb-but-new.npz"]  # not ours, and one written by a live run
    hour_ago = time.time() - 3600
    for path in left + kept:
        path.write_bytes(b"x" * 1024)
    for path in left + kept[:1]:
        os.utime(path, (hour_ago, hour_ago))
    result = run("traindoc", "index", timeout=600)
    assert result.returncode == 0, result.stderr
    assert [p for p in left if p.exists()] == [] and all(p.exists() for p in kept)
