"""`traindoc probe`'s table: one row per check, problems first, the count line; details only with -v / --json.
On this machine (no GPU) and against the real H100 probe output in data/gpu-h100."""

import argparse
import json
import re
import sys
from pathlib import Path

import pytest
from clikit import ROOT, isolated_env, run_cli
from fakes.fake_torch import write_fake_torch
from fakes.nvml import FakeNvml
from rich.console import Console
from toolkit_fakes import DATA

from tools import gpu_inventory, system_info, torch_cuda_compat
from tools.base import ProbeContext, ProbeResult, Status
from tools.check_rows import VERDICTS, Row, rows, summary_line
from tools.registry import PROBES
from tools.report import bundle, load_bundle
from tools.target_python import _memo
from tools.verdicts import rejudge

VENV_PYTHON = str(ROOT / ".venv" / "bin" / "python")


def h100_results(**report_changes):
    """The real H100 evidence of gpu_inventory and torch_cuda_compat, re-judged by traindoc's rules, and
    system_info reading that machine's /proc/driver/nvidia/version."""
    data = json.loads((DATA / "traindoc-gpu-probes-h100.json").read_text())
    data["torch_cuda_compat"]["evidence"]["report"].update(report_changes)
    results = [rejudge(ProbeResult(name, Status(entry["status"]), "", (), entry["evidence"]), "h100")
               for name, entry in data.items()]
    files = {"/proc/driver/nvidia/version": (DATA / "proc-driver-nvidia-version.txt").read_text(),
             "/etc/os-release": 'PRETTY_NAME="Ubuntu 24.04.3 LTS"\n'}
    return results + [system_info.probe(ProbeContext(environ={}), read=files.get)]


def by_check(table):
    return {row.check: row for row in table}


def test_h100_table_reads_like_nvidia_smi_and_collect_env():
    table = rows(h100_results())
    checks = by_check(table)
    assert checks["GPUs"].value == "1 × NVIDIA H100 80GB HBM3 (sm_90); GPU 0 memory 480/81559 MiB used"
    assert checks["NVIDIA driver"].value == "580.159.04 (supports CUDA up to 13.0)"
    assert "NVIDIA kernel module" not in checks  # the same version as NVML's: one driver row
    assert checks["torch"].value.startswith("2.11.0+cu130, CUDA 13.0, 1 GPU(s) visible to torch")
    assert checks["GPU arch support"].value == "sm_90 in arch list sm_75 sm_80 sm_86 sm_90 sm_100 sm_120"
    assert checks["driver vs torch CUDA"].value == "driver supports CUDA 13.0, torch needs 13.0"
    assert checks["OS"].value.startswith("Ubuntu 24.04.3 LTS, kernel ")
    assert {row.verdict for row in table} == {"ok"}
    assert summary_line(table) == f"{len(table)} ok"


def test_a_kernel_module_that_differs_from_nvml_gets_its_own_row():
    results = h100_results()
    text = (DATA / "proc-driver-nvidia-version.txt").read_text().replace("580.159.04", "575.51.03")
    results[-1] = system_info.probe(ProbeContext(environ={}), read={"/proc/driver/nvidia/version": text}.get)
    assert by_check(rows(results))["NVIDIA kernel module"].value == "575.51.03 (NVML's library is 580.159.04)"


def test_a_problem_row_comes_first_and_is_counted():
    """The same H100 with a driver that supports only CUDA 12.8: torch 2.11+cu130 cannot run."""
    results = h100_results(driver_cuda=12080)
    results[0].evidence["cuda_driver_version"] = "12.8"
    table = rows([rejudge(r, "h100") for r in results])
    assert (table[0].check, table[0].verdict) == ("driver vs torch CUDA", "problem")
    assert "DRIVER_TOO_OLD" in [f.code for f in table[0].findings]
    assert [VERDICTS.index(r.verdict) for r in table] == sorted(VERDICTS.index(r.verdict) for r in table)
    assert summary_line(table).startswith("1 problem, ")


def test_a_bundle_gives_the_same_table(tmp_path):
    results = h100_results()
    path = tmp_path / "h100.json"
    path.write_text(json.dumps(bundle(results)))
    assert [(r.check, r.verdict, r.value) for r in rows(load_bundle(path))] == \
        [(r.check, r.verdict, r.value) for r in rows(results)]


def test_unavailable_rows_say_why_and_come_last():
    table = rows([ProbeResult("log_grep", Status.UNAVAILABLE, "no log files given"),
                  ProbeResult("processes", Status.TIMED_OUT, "did not finish within 10.0s")] + h100_results())
    assert (table[0].verdict, table[0].check) == ("timed out", "training processes")
    assert (table[-1].verdict, table[-1].check, table[-1].value) == ("unavailable", "log scan", "no log files given")
    assert summary_line(table).endswith("1 unavailable") and "1 timed out" in summary_line(table)


# -- a GPU is visible, torch is CPU-only -----------------------------------------------------------------------

H100 = {"driver": "580.159.04", "cuda": 13000, "gpus": [{"name": "NVIDIA H100 80GB HBM3", "capability": (9, 0)}]}


@pytest.fixture
def cpu_torch_on_path(tmp_path):
    """A +cpu torch in the first python on PATH, no --python, no venv or conda: only a guess at the job's."""
    _memo.clear()
    site = write_fake_torch(tmp_path / "site", version="2.11.0+cpu", cuda=None, archs=(), nccl=None)
    return ProbeContext(environ={"PATH": str(Path(sys.executable).parent), "PYTHONPATH": str(site)}, timeout_s=30)


@pytest.mark.parametrize("visible", ["nvml", "dev-nvidia"])
def test_cpu_torch_where_a_gpu_is_visible_is_a_problem(cpu_torch_on_path, visible):
    if visible == "nvml":
        facts, nodes = (lambda ctx: gpu_inventory.read_nvml(FakeNvml(H100))), (lambda: [])
    else:
        facts, nodes = (lambda ctx: None), (lambda: ["/dev/nvidia0"])
    result = torch_cuda_compat.probe(cpu_torch_on_path, gpu_facts=facts, nodes=nodes)
    assert result.status == Status.PROBLEM
    assert [(f.code, f.severity) for f in result.findings] == [("TORCH_CPU_ONLY", "problem")]
    top = rows([result])[0]
    assert (top.check, top.verdict) == ("torch", "problem") and "CPU-only" in top.value
    assert "the first python on PATH" in top.value  # which interpreter was seen is said


def test_cpu_torch_in_a_guessed_interpreter_without_a_gpu_is_a_note(cpu_torch_on_path):
    result = torch_cuda_compat.probe(cpu_torch_on_path, gpu_facts=lambda ctx: None, nodes=lambda: [])
    assert result.status == Status.OK and [f.severity for f in result.findings] == ["info"]
    assert rows([result])[0].verdict == "note"


# -- the command ---------------------------------------------------------------------------------------------

LINE = re.compile(r"^(problem|error|timed out|note|ok|unavailable) +(.+?)  +(.*)$")


def parse(stdout):
    lines = stdout.rstrip("\n").splitlines()
    assert lines[0].split() == ["verdict", "check", "value"], lines[0]
    body = [LINE.match(line) for line in lines[1:-1]]
    assert all(body), lines
    return [(m.group(1), m.group(2).strip(), m.group(3)) for m in body], lines[-1]


def test_the_table_on_this_machine(tmp_path):
    result = run_cli("traindoc", "probe", "--python", VENV_PYTHON, "--timeout", "60", env=isolated_env(tmp_path))
    assert result.returncode == 0, result.stderr
    table, summary = parse(result.stdout)
    checks = [check for _, check, _ in table]
    assert len(checks) == len(set(checks)), "one row per check"
    for wanted in ("torch", "cuDNN", "Python", "OS", "glibc", "C/C++ compiler", "CUDA toolkit (nvcc)", "GPUs",
                   "DeepSpeed", "RAM, /dev/shm", "disk"):
        assert wanted in checks, (wanted, checks)
    verdicts = [v for v, _, _ in table]
    assert verdicts == sorted(verdicts, key=VERDICTS.index), "problems first, unavailable last"
    row = {check: (v, value) for v, check, value in table}
    assert row["torch"][0] == "problem" and "CPU-only" in row["torch"][1]  # this venv's torch is +cpu
    assert row["DeepSpeed"][0] == "unavailable" and "not installed" in row["DeepSpeed"][1]
    counts = {v: verdicts.count(v) for v in set(verdicts)}
    assert summary.split(";")[0] == _plural(counts), summary
    assert "traindoc probe -v" in summary
    assert "None" not in result.stdout and "packages." not in result.stdout


def _plural(counts):
    words = {"problem": "problems", "note": "notes", "error": "errors"}
    return ", ".join(f"{n} {v if n == 1 else words.get(v, v)}" for v, n in
                     sorted(counts.items(), key=lambda kv: VERDICTS.index(kv[0])))


def test_a_terminal_gets_whole_words_within_its_width():
    from traindoc_cli.probe import print_table

    console = Console(width=80, force_terminal=True, record=True, color_system=None)
    value = "torch 2.11.0+cpu is a CPU-only build but this machine has NVIDIA GPUs: " + "reinstall-a-CUDA-build " * 5
    print_table(console, [Row("torch", "problem", value, "torch_cuda_compat"), Row("OS", "ok", "Ubuntu", "system_info")])
    lines = console.export_text().splitlines()
    assert all(len(line) <= 80 for line in lines), lines
    shown = lines[1].split("torch", 1)[1].strip()
    assert shown.endswith("…") and value.startswith(shown[:-1]) and value[len(shown) - 1] == " ", shown


def probe_args(**changes):
    values = {"compare": None, "json": False, "verbose": False, "timeout": 60.0, "log": [], "port": [],
              "output_dir": [], "python": VENV_PYTHON}
    return argparse.Namespace(**{**values, **changes})


def test_verbose_adds_evidence_and_fixes_under_the_table(capsys, monkeypatch):
    from traindoc_cli.probe import run_probe_command

    monkeypatch.setenv("COLUMNS", "120")
    assert run_probe_command(probe_args(verbose=True)) == 0
    out = capsys.readouterr().out
    table_part, details = out.split("\n\n", 1)
    assert table_part.splitlines()[0].split() == ["verdict", "check", "value"]
    assert "fix: " in details and "TORCH_CPU_ONLY" in details
    assert "report.torch: " in details and "report.torch_cuda" not in details  # a CPU build: no CUDA line
    assert ": None" not in out  # empty facts are no lines, even in detail
    assert re.match(r"^\d+ (problem|note|ok)", out.rstrip().splitlines()[-1]), "the count line is last"


def test_json_still_carries_every_detail(capsys):
    from traindoc_cli.probe import run_probe_command

    assert run_probe_command(probe_args(json=True)) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["probe"] for r in data["results"]] == list(PROBES)
    versions = next(r for r in data["results"] if r["probe"] == "versions")
    assert "torchvision" in versions["evidence"]["packages"]  # the empty ones too
    compat = next(r for r in data["results"] if r["probe"] == "torch_cuda_compat")
    assert compat["findings"][0]["fix"]


def test_a_real_h200_bundle_as_a_table():
    """traindoc's own probes on an H200 (tests/tools/data/gpu-h200), read back as a bundle from another node."""
    table = rows(load_bundle(DATA.parent / "gpu-h200" / "traindoc-probe-h200.json"))
    checks = by_check(table)
    assert checks["GPUs"].value == "1 × NVIDIA H200 (sm_90); GPU 0 memory 615/143771 MiB used"
    assert checks["cuDNN"].value == "9.19.0 (loaded by torch); wheel nvidia-cudnn-cu13 9.19.0.56"
    assert checks["CUDA toolkit (nvcc)"].value.startswith("13.0, /usr/local/cuda/bin/nvcc")
    assert checks["C/C++ compiler"].value == "gcc 13.3.0, g++ 13.3.0"  # $CXX=/opt/gcc/bin/g++ is the same g++
    assert (checks["glibc"].value, checks["NCCL"].value) == ("2.39", "2.28.9 (torch); wheel nvidia-nccl-cu13 2.28.9")
    assert checks["DeepSpeed"].verdict == "unavailable" and "not installed" in checks["DeepSpeed"].value
    assert summary_line(table) == "1 note, 17 ok, 2 unavailable"
