"""A failure resolved once and asked again: the real ``ask()`` over the session's index, on the repository's real
and pasted logs, with the incident kept by the same code the front ends call (``incidents.record``)."""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from clikit import ROOT

from agent.intake import Received, intake
from incidents.recall import incident_files, recall
from incidents.record import record_fixed
from incidents.store import IncidentStore, local_path

PASTES = ROOT / "tests" / "jobs" / "data" / "pastes"
GPU_REAL = ROOT / "tests" / "jobs" / "data" / "gpu-real"
SOCKET_LOG = PASTES / "nccl_socket_creation.log"  # node7, NCCL's socket creation fails


@pytest.fixture(scope="module")
def troubleshooter(shared_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from agent.core import build_troubleshooter
    from common.settings import Settings

    feedback = tmp_path_factory.mktemp("incidents") / "feedback.sqlite3"
    return build_troubleshooter(Settings(data_dir=shared_index, feedback_db=feedback))


@pytest.fixture
def store(troubleshooter: Any) -> Iterator[IncidentStore]:
    kept = IncidentStore(local_path(troubleshooter.settings.feedback_path))
    kept.path.unlink(missing_ok=True)
    yield kept
    kept.path.unlink(missing_ok=True)


def ask(troubleshooter: Any, *, log: Path | None = None, text: str = "") -> Any:
    return troubleshooter.ask(intake(Received(text=text, logs=(log,) if log else (), probes=False)))


def rewritten(source: Path, target: Path, swaps: dict[str, str]) -> Path:
    text = source.read_text(encoding="utf-8")
    for old, new in swaps.items():
        assert old in text, old
        text = text.replace(old, new)
    target.write_text(text, encoding="utf-8")
    return target


def test_a_resolved_failure_leads_its_next_answer_with_the_date_node_and_fix(troubleshooter: Any, store: IncidentStore,
                                                                               tmp_path: Path) -> None:
    first = ask(troubleshooter, log=SOCKET_LOG)
    assert first.failure is not None and first.failure.hosts == ("node7",) and not first.incidents
    assert not store.path.exists()  # asking keeps nothing: only a user's mark does
    incident = record_fixed(store, first, note="set NCCL_SOCKET_FAMILY=AF_INET in the launcher", channel="cli")
    assert incident is not None and incident.kind == first.lead.kind == "nccl_network"

    # the same failure on another node, PID, thread, device and address
    again_log = rewritten(SOCKET_LOG, tmp_path / "again.log", {"node7:5531:5531 [3]": "node12:8812:8812 [5]",
                                                                "node7:5531:5590 [3]": "node12:8812:8890 [5]",
                                                                "10.2.0.7": "10.2.0.12"})
    again = ask(troubleshooter, log=again_log)
    first_line = again.shown.splitlines()[0]
    assert first_line.startswith("**Seen before:**"), again.shown[:300]
    assert incident.date in first_line and "node node7" in first_line
    assert first_line.endswith("what fixed it then: set NCCL_SOCKET_FAMILY=AF_INET in the launcher")  # the user's note
    assert again.answer.splitlines()[0] == first_line  # the whole answer (--full, --json) leads with it too
    # beside the new job's evidence, never instead of it: the verdict and the job's own node follow
    rest = again.shown.split("\n", 2)[2]
    assert rest.startswith(first.shown.split("\n", 1)[0]) and "node12" in rest and "Where" in rest
    data = again.to_json()
    assert [(i["id"], i["date"], i["hosts"], i["rule"]) for i in data["incidents"]] == [
        (incident.id, incident.date, ["node7"], "exact message")]
    assert data["failure"]["hosts"] == ["node12"] and data["verdict"]["cause"] == first.to_json()["verdict"]["cause"]


def test_the_same_oom_with_other_sizes_pids_times_and_ports_matches_by_its_normalised_message(
        troubleshooter: Any, store: IncidentStore, tmp_path: Path) -> None:
    source = GPU_REAL / "oom_crash" / "console.log"  # a real OOM of a two-rank job on one H100
    first = ask(troubleshooter, log=source)
    assert record_fixed(store, first, channel="web") is not None
    again = ask(troubleshooter, log=rewritten(source, tmp_path / "oom.log", {
        "149.01 GiB": "37.25 GiB", "73.15 GiB": "11.02 GiB", "Process 475 ": "Process 1475 ", "Process 483 ": "Process 2483 ",
        "10:48:5": "23:12:0", ":1948": ":2950"}))
    assert again.failure.messages != first.failure.messages  # not the same line: the same failure
    assert [i["rule"] for i in again.incidents] == ["same kind and message"]
    line = again.shown.splitlines()[0]
    assert line.startswith("**Seen before:**") and "(GPU 0)" in line
    fix = first.verdict.fix_line
    assert fix and fix in line, (fix, line)  # no note: traindoc's first fix then


def test_a_different_failure_of_the_same_kind_is_not_a_match(troubleshooter: Any, store: IncidentStore) -> None:
    nccl = ask(troubleshooter, log=PASTES / "nccl_bootstrap_no_interface.log")  # NCCL: no socket interface found
    assert record_fixed(store, nccl, note="brought ens1f0 up on the node") is not None
    gloo = ask(troubleshooter, log=PASTES / "gloo_no_address.log")  # gloo: no address for ens5f0
    assert gloo.lead.kind == nccl.lead.kind == "nccl_interface"
    assert gloo.incidents == [] and "Seen before" not in gloo.answer
    assert ask(troubleshooter, log=PASTES / "nccl_bootstrap_no_interface.log").incidents  # while itself still matches


def test_a_pasted_error_matches_the_log_it_came_from(troubleshooter: Any, store: IncidentStore) -> None:
    logged = ask(troubleshooter, log=PASTES / "gloo_no_address.log")
    record_fixed(store, logged, note="GLOO_SOCKET_IFNAME=ens1f0")
    pasted = ask(troubleshooter, text="my job on gpu-17 died: RuntimeError: [enforce fail at "
                 "../third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != nullptr. Unable to find address for: ens3f1")
    assert [i["note"] for i in pasted.incidents] == ["GLOO_SOCKET_IFNAME=ens1f0"]
    assert pasted.failure.hosts == ("gpu-17",)


def test_secrets_in_the_question_and_the_note_are_masked_in_the_file(troubleshooter: Any, store: IncidentStore) -> None:
    hf, xoxb = "hf_" + "Ab3dEfGh1jKlMn0pQrStUvWxYz12345678", "xoxb-" + "1234567890-0987654321-AbCdEfGhIjKlMnOpQrStUvWx"
    answer = ask(troubleshooter, text=f"HF_TOKEN={hf} python train.py fails on node7:\nRuntimeError: [enforce fail at "
                 f"../third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != nullptr. Unable to find address for: ens5f0")
    incident = record_fixed(store, answer, note=f"rotated {xoxb} and password=hunter2hunter2 then set GLOO_SOCKET_IFNAME")
    assert incident is not None
    raw = store.path.read_text(encoding="utf-8")
    for secret in (hf, xoxb, "hunter2hunter2"):
        assert secret not in raw
    kept = json.loads(raw)
    assert "***" in kept["note"] and kept["note"].endswith("then set GLOO_SOCKET_IFNAME")
    assert "Unable to find address" in kept["messages"][0]
    assert kept["question"].startswith("HF_TOKEN=*** python train.py")
    assert stat.S_IMODE(os.stat(store.path).st_mode) == 0o600


def test_no_incident_file_is_no_work_and_a_team_file_is_matched(troubleshooter: Any, store: IncidentStore,
                                                                tmp_path: Path) -> None:
    answer = ask(troubleshooter, log=SOCKET_LOG)
    assert incident_files(troubleshooter.settings) == [] and answer.incidents == []
    team = tmp_path / "team-runbooks"
    team.mkdir()
    record_fixed(store, answer, note="the NCCL_SOCKET_FAMILY fix from the wiki")
    store.path.rename(team / "gpu-cluster.incidents.jsonl")  # exported and placed in the team's corpus folder
    settings = replace(troubleshooter.settings, corpus_paths=(*troubleshooter.settings.corpus_paths, team))
    assert incident_files(settings) == [(team / "gpu-cluster.incidents.jsonl", "gpu-cluster.incidents.jsonl")]
    again = ask(troubleshooter, log=SOCKET_LOG)
    again.answer, again.brief = answer.answer, answer.brief  # the line is added once, by recall
    recall(again, settings)
    assert again.incidents[0]["source"] == "gpu-cluster.incidents.jsonl"
    assert re.match(r"\*\*Seen before:\*\* .* \(shared in gpu-cluster\.incidents\.jsonl\)$", again.shown.splitlines()[0])
