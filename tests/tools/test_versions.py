"""The versions probe, through the shared target-interpreter report (tools/data/torch_report.py)."""

import json

from tools import versions
from tools.base import CommandResult, ProbeContext, Status


def fake_run(versions_report: dict):
    def run(args, timeout_s, env):
        payload = {"torch": {"python": "3.11.7"}, "versions": versions_report}
        return CommandResult(tuple(args), 0, json.dumps(payload), "")
    return run


def report(packages, pins=(), nccl=None):
    return {"python": "3.11.7", "executable": "/x/python", "packages": packages, "torch_pins": list(pins),
            "nccl": nccl, "torch_cuda": "12.8"}


def probe(data, base_env):
    return versions.probe(ProbeContext(python="/x/python", environ=base_env, timeout_s=5), run=fake_run(data))


def test_torch_pin_conflict(base_env, monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name, path=None: name)
    result = probe(report({"torch": "2.5.1", "vllm": "0.8.0"},
                          [{"package": "vllm", "version": "0.8.0", "requires": "torch==2.6.0"}]), base_env)
    assert result.status == Status.PROBLEM
    assert [f.code for f in result.findings] == ["TORCH_VERSION_CONFLICT"]
    assert "torch==2.6.0" in result.findings[0].summary


def test_nccl_wheel_differs_is_info(base_env, monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name, path=None: name)
    result = probe(report({"torch": "2.7.0", "nvidia-nccl-cu12": "2.26.2"}, nccl="2.21.5"), base_env)
    assert result.status == Status.OK
    assert [f.code for f in result.findings] == ["NCCL_VERSION_DIFFERS"]


def test_clean_summary_and_evidence(base_env, monkeypatch):
    monkeypatch.setattr("shutil.which", lambda name, path=None: name)
    result = probe(report({"torch": "2.7.0", "numpy": "2.1.0", "vllm": None}, nccl="2.26.2"), base_env)
    assert result.status == Status.OK and not result.findings
    assert result.summary == "Python 3.11.7; torch 2.7.0, numpy 2.1.0; NCCL 2.26.2"
    assert result.evidence["python_path"] == "/x/python" and result.evidence["packages"]["vllm"] is None


def test_real_interpreter(target_python, base_env):
    result = versions.probe(ProbeContext(python=target_python, environ=base_env, timeout_s=30))
    assert result.status in (Status.OK, Status.PROBLEM), result.summary
    assert result.evidence["python_path"] == target_python
    assert result.evidence["packages"]["numpy"]
