"""Two real training jobs on one machine (two torchrun launchers, CPU): `ask` about a hang lists both (PID, user,
command) and how to pick, `ask --pid` reads the one picked, and the web chat reads no process of its own host
unless its operator turned that on."""

from __future__ import annotations

import getpass
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hangkit import HungJob

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


@pytest.fixture
def two_jobs(tmp_path: Path) -> Iterator[tuple[HungJob, HungJob]]:
    """Two launchers, each waiting in its rendezvous for a second node that never comes (no rank starts: cheap)."""
    jobs = (HungJob(tmp_path / "a", nnodes=2), HungJob(tmp_path / "b", nnodes=2))
    try:
        for job in jobs:
            job.workdir.mkdir()
            job.start()
        yield jobs
    finally:
        for job in jobs:
            job.stop()


def test_ask_lists_the_jobs_of_a_shared_machine_and_reads_the_one_picked(two_jobs: tuple[HungJob, HungJob], cli,
                                                                         use_shared_index: Path) -> None:
    first, second = two_jobs
    listed = cli("ask", "--format", "text", "my training job hangs, nothing is printed")
    assert listed.returncode == 0, listed.stderr
    # Other tests' jobs may run beside these two (the suite runs in parallel): at least these two are listed.
    count = re.search(r"(\d+) training jobs run on this machine", listed.stdout)
    assert count is not None and int(count.group(1)) >= 2, listed.stdout[:800]
    user = getpass.getuser()
    for job in two_jobs:
        assert f"PID {job.pid} ({user}):" in listed.stdout
        assert f"--master-port={job.master_port}" in listed.stdout  # its command tells the two apart
    assert re.search(r'ask --pid \d+ "<your question>"', listed.stdout), listed.stdout[-600:]

    picked = cli("ask", "--json", "--pid", str(second.pid), "my training job hangs")
    assert picked.returncode == 0, picked.stderr
    answer = json.loads(picked.stdout)
    root = answer["diagnosis"]["root_cause"]
    assert root["category"] == "rendezvous" and f"pid {second.pid}" in root["summary"]
    assert "training jobs run on this machine" not in answer["answer"]


@pytest.mark.parametrize("argv, said", [
    (["--pid", "0", "hang"], "--pid picks a job on this machine"),
    (["--pid", "5", "--no-probes", "hang"], "--pid picks a job on this machine"),
])
def test_a_pid_that_cannot_pick_is_one_line(cli, argv: list[str], said: str) -> None:
    result = cli("ask", *argv)
    assert result.returncode == 2 and said in result.stderr and "Traceback" not in result.stderr


def test_the_web_chat_reads_no_process_of_its_host_unless_its_operator_says_so(two_jobs: tuple[HungJob, HungJob],
                                                                                use_shared_index: Path,
                                                                                tmp_path: Path) -> None:
    from agent.core import build_troubleshooter
    from common.settings import Settings
    from traindoc_web.chat import WebChat, WebOptions

    troubleshooter = build_troubleshooter(Settings.from_env())

    def asked(options: WebOptions) -> dict:
        chat = WebChat(troubleshooter, options)
        *_, (_, _, _, answers, *_) = chat.respond("my training job hangs", [], None, [])
        return answers[-1]["answer"]

    closed = asked(WebOptions(feedback_db=tmp_path / "fb-closed.sqlite3", history_days=0))
    assert closed["diagnosis"] is None and closed["findings"] == []
    assert all(str(job.pid) not in closed["answer"] for job in two_jobs)
    panel = WebChat(troubleshooter, WebOptions(feedback_db=tmp_path / "fb.sqlite3", history_days=0)).probe_report()
    assert "TRAINDOC_WEB_PROBES=host" in panel
    from tools.registry import PROBES

    table = WebChat(troubleshooter, WebOptions(feedback_db=tmp_path / "fb.sqlite3", history_days=0,
                                               host_probes=True)).probe_report()
    assert table.startswith("<table") and table.count("<tr>") == len(PROBES) + 1

    opened = asked(WebOptions(feedback_db=tmp_path / "fb-open.sqlite3", history_days=0,
                              host_probes=True))
    # Other tests' jobs may run beside these two (the suite runs in parallel): at least these two are listed.
    count = re.search(r"(\d+) training jobs run on this machine", opened["answer"])
    assert count is not None and int(count.group(1)) >= 2, opened["answer"][:800]
    assert all(f"PID {job.pid} " in opened["answer"] for job in two_jobs), opened["answer"][:800]
