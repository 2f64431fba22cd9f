"""The target interpreter runs once per probe sweep: torch_cuda_compat and versions share one report."""

import threading
import time
from pathlib import Path

import pytest
from fakes.fake_torch import write_fake_torch

from tools import target_python, torch_cuda_compat, versions
from tools.base import CommandResult, ProbeContext, Status
from tools.registry import run_probes
from tools.target_python import ScriptError, shared_report


def counting_interpreter(tmp_path: Path, target: str) -> tuple[str, Path]:
    """A wrapper interpreter that records each start in a file, then execs the real one."""
    starts = tmp_path / "starts"
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\necho start >> "{starts}"\nexec "{target}" "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper), starts


def start_count(starts: Path) -> int:
    return len(starts.read_text().splitlines()) if starts.exists() else 0


def test_one_interpreter_start_per_sweep(tmp_path, target_python, base_env):
    root = write_fake_torch(tmp_path / "site", devices=(("NVIDIA GeForce RTX 5090", (12, 0)),))
    python, starts = counting_interpreter(tmp_path, target_python)
    ctx = ProbeContext(python=python, environ={**base_env, "PYTHONPATH": str(root)}, timeout_s=30)
    results = {r.probe: r for r in run_probes(["torch_cuda_compat", "versions"], ctx)}
    assert start_count(starts) == 1
    assert [f.code for f in results["torch_cuda_compat"].findings] == ["CUDA_ARCH_UNSUPPORTED"]
    assert results["versions"].status in (Status.OK, Status.PROBLEM)
    assert "packages" in results["versions"].evidence and "arch_list" in results["torch_cuda_compat"].evidence["report"]
    run_probes(["torch_cuda_compat", "versions"], ctx)  # a second sweep measures again
    assert start_count(starts) == 2


def test_probes_keep_their_own_report_sections(tmp_path, target_python, base_env):
    root = write_fake_torch(tmp_path / "site", devices=(("NVIDIA A100", (8, 0)),))
    ctx = ProbeContext(python=target_python, environ={**base_env, "PYTHONPATH": str(root)}, timeout_s=30)
    compat = torch_cuda_compat.probe(ctx, gpu_facts=lambda c: None)
    vers = versions.probe(ctx)
    report = compat.evidence["report"]
    assert report["torch"] == "2.5.1+cu124" and report["devices"][0]["capability"] == [8, 0]
    assert "packages" not in report
    assert set(vers.evidence) >= {"python_path", "python", "executable", "packages", "torch_pins", "nccl"}
    assert "arch_list" not in vers.evidence


class CountingRun:
    def __init__(self, stdout: str = '{"torch": {"torch": "2.7.0"}, "versions": {"packages": {}}}',
                 delay: float = 0.0, returncode: int = 0) -> None:
        self.calls = 0
        self.stdout, self.delay, self.returncode = stdout, delay, returncode
        self.lock = threading.Lock()

    def __call__(self, args, timeout_s, env):
        with self.lock:
            self.calls += 1
        time.sleep(self.delay)
        return CommandResult(tuple(args), self.returncode, self.stdout, "boom" if self.returncode else "")


def test_concurrent_readers_wait_for_the_single_run(base_env):
    run = CountingRun(delay=0.3)
    ctx = ProbeContext(python="/x/python", environ=base_env, timeout_s=5)
    out: dict[str, dict] = {}

    def read(section: str) -> None:
        out[section] = target_python.target_report("/x/python", ctx, run, 5, section)

    threads = [threading.Thread(target=read, args=(s,)) for s in ("torch", "versions")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert run.calls == 1
    assert out == {"torch": {"torch": "2.7.0"}, "versions": {"packages": {}}}


def test_same_reader_again_is_a_new_sweep(base_env):
    run = CountingRun()
    ctx = ProbeContext(python="/x/python", environ=base_env, timeout_s=5)
    shared_report("/x/python", "torch_report.py", ctx, run, 5, consumer="torch")
    shared_report("/x/python", "torch_report.py", ctx, run, 5, consumer="versions")
    assert run.calls == 1
    shared_report("/x/python", "torch_report.py", ctx, run, 5, consumer="torch")
    assert run.calls == 2


@pytest.mark.parametrize("change", ["environ", "python", "timeout"])
def test_different_interpreter_or_environment_is_not_shared(base_env, change):
    run = CountingRun()
    ctx = ProbeContext(python="/x/python", environ=base_env, timeout_s=5)
    shared_report("/x/python", "torch_report.py", ctx, run, 5, consumer="torch")
    python = "/y/python" if change == "python" else "/x/python"
    other = ProbeContext(python=python, environ={**base_env, "PYTHONPATH": "/z"} if change == "environ" else base_env,
                         timeout_s=6 if change == "timeout" else 5)
    shared_report(python, "torch_report.py", other, run, 5, consumer="versions")
    assert run.calls == 2


def test_expired_result_is_not_reused(base_env):
    run = CountingRun()
    ctx = ProbeContext(python="/x/python", environ=base_env, timeout_s=0.1)
    shared_report("/x/python", "torch_report.py", ctx, run, 5, consumer="torch")
    time.sleep(1.2)  # past the sweep's deadline (timeout_s + 1 s)
    shared_report("/x/python", "torch_report.py", ctx, run, 5, consumer="versions")
    assert run.calls == 2


def test_a_failed_run_is_shared_as_the_same_error(base_env, monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name, path=None: name)
    run = CountingRun(returncode=1)
    ctx = ProbeContext(python="/x/python", environ=base_env, timeout_s=5)
    compat = torch_cuda_compat.probe(ctx, run=run, gpu_facts=lambda c: None)
    vers = versions.probe(ctx, run=run)
    assert run.calls == 1
    assert compat.status == vers.status == Status.ERROR
    assert "boom" in compat.summary and "boom" in vers.summary


def test_report_without_the_section_is_an_error(base_env):
    run = CountingRun(stdout='{"python": "3.8"}')
    ctx = ProbeContext(python="/x/python", environ=base_env, timeout_s=5)
    with pytest.raises(ScriptError, match="no 'versions' section"):
        target_python.target_report("/x/python", ctx, run, 5, "versions")


def test_hung_interpreter_times_out_both_probes_once(tmp_path, base_env):
    hang = tmp_path / "python"
    hang.write_text(f'#!/bin/sh\necho start >> "{tmp_path / "starts"}"\nsleep 30\n')
    hang.chmod(0o755)
    ctx = ProbeContext(python=str(hang), environ=base_env, timeout_s=1)
    started = time.monotonic()
    results = {r.probe: r for r in run_probes(["torch_cuda_compat", "versions"], ctx)}
    assert time.monotonic() - started < 5
    assert results["torch_cuda_compat"].status == results["versions"].status == Status.TIMED_OUT
    assert start_count(tmp_path / "starts") == 1
