"""The incident commands as a user runs them: `ask`, `traindoc feedback fixed`, `ask` again on the same failure
elsewhere, and `traindoc incidents list|export|delete|import`, each a real process over the session's index."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clikit import ROOT

SOCKET_LOG = ROOT / "tests" / "jobs" / "data" / "pastes" / "nccl_socket_creation.log"

pytestmark = pytest.mark.usefixtures("use_shared_index")


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("TRAINDOC_FEEDBACK_DB", str(tmp_path / "kept" / "feedback.sqlite3"))
    return {}


def run(cli: Any, *args: str, code: int = 0) -> Any:
    done = cli(*args)
    assert done.returncode == code, (args, done.stdout[-600:], done.stderr[-800:])
    if code:
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
    return done


def test_fixed_then_asked_again_then_list_export_delete_import(cli: Any, env: dict[str, str], tmp_path: Path) -> None:
    kept = tmp_path / "kept"
    run(cli, "traindoc", "feedback", "fixed", code=2)  # nothing asked yet: one line says so
    run(cli, "ask", "--no-probes", "--log", str(SOCKET_LOG))
    marked = run(cli, "traindoc", "feedback", "fixed", "--note", "NCCL_SOCKET_FAMILY=AF_INET; token hf_" + "x1Y2z3" * 6)
    assert "recorded incident" in marked.stderr
    listed = run(cli, "traindoc", "incidents", "list").stdout
    assert "nccl_network" in listed and "node7" in listed and "NCCL_SOCKET_FAMILY=AF_INET" in listed
    assert "hf_x1Y2" not in listed and "hf_x1Y2" not in (kept / "incidents.jsonl").read_text(encoding="utf-8")
    incident = json.loads(run(cli, "traindoc", "incidents", "list", "--json").stdout)

    again = tmp_path / "node12.log"
    again.write_text(SOCKET_LOG.read_text(encoding="utf-8").replace("node7:5531", "node12:8812").replace("[3]", "[5]"),
                     encoding="utf-8")
    text = run(cli, "ask", "--no-probes", "--format", "text", "--log", str(again)).stdout
    assert text.splitlines()[0] == (f"Seen before: this cluster saw this on {incident['date']} on node node7; what fixed it "
                                    "then: NCCL_SOCKET_FAMILY=AF_INET; token ***"), text[:400]
    assert "node12" in text  # the new job's evidence stays
    markdown = run(cli, "ask", "--no-probes", "--format", "markdown", "--log", str(again)).stdout
    assert markdown.startswith("**Seen before:**")
    answer = json.loads(run(cli, "ask", "--json", "--no-probes", "--log", str(again)).stdout)
    assert [i["id"] for i in answer["incidents"]] == [incident["id"]] and answer["failure"]["hosts"] == ["node12"]

    shared = tmp_path / "team" / "incidents.jsonl"
    shared.parent.mkdir()
    run(cli, "traindoc", "incidents", "export", str(shared))
    assert [json.loads(line)["id"] for line in shared.read_text(encoding="utf-8").splitlines()] == [incident["id"]]
    run(cli, "traindoc", "incidents", "delete", incident["id"])
    assert run(cli, "traindoc", "incidents", "list").stdout == ""
    run(cli, "traindoc", "incidents", "delete", incident["id"], code=1)
    assert "Seen before" not in run(cli, "ask", "--no-probes", "--format", "text", "--log", str(again)).stdout
    assert "imported 1 " in run(cli, "traindoc", "incidents", "import", str(shared)).stderr
    assert "imported 0 " in run(cli, "traindoc", "incidents", "import", str(shared)).stderr  # already held
    assert json.loads(run(cli, "traindoc", "incidents", "list", "--json").stdout)["id"] == incident["id"]
    run(cli, "traindoc", "incidents", "import", str(tmp_path / "missing.jsonl"), code=1)
    run(cli, "traindoc", "incidents", code=2)


def test_an_answer_file_is_marked_and_a_question_without_an_error_is_refused(cli: Any, env: dict[str, str],
                                                                              tmp_path: Path) -> None:
    saved = tmp_path / "answer.json"
    saved.write_text(run(cli, "ask", "--json", "--no-probes", "--log", str(SOCKET_LOG)).stdout, encoding="utf-8")
    run(cli, "ask", "--no-probes", "why is NCCL slow on 8 nodes")  # names no error: nothing to recognise it by
    run(cli, "traindoc", "feedback", "fixed", code=2)  # the last answer is that one: not the earlier file
    run(cli, "traindoc", "feedback", "fixed", str(saved), "--note", "drained node7")
    assert json.loads(run(cli, "traindoc", "incidents", "list", "--json").stdout)["note"] == "drained node7"
    run(cli, "traindoc", "feedback", "fixed", str(tmp_path / "nope.json"), code=1)
