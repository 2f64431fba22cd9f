"""Helpers for the integration tests: run the console scripts, read their JSON, fake hardware."""

from __future__ import annotations

import json
import os
import secrets
import string
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clikit import run_cli

from tools.base import ProbeResult
from tools.report import bundle

PROBE_TIMEOUT_VAR = "TRAINDOC_PROBE_TIMEOUT"


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def json(self) -> Any:
        return json.loads(self.stdout)


def run(prog: str, *args: str, env: dict[str, str] | None = None, timeout: float = 120) -> Run:
    started = time.monotonic()
    result = run_cli(prog, *args, env=env, timeout=timeout)
    return Run(result.returncode, result.stdout, result.stderr, time.monotonic() - started)


def ask_json(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> tuple[dict[str, Any], Run]:
    result = run("ask", "--json", *args, env=env, timeout=timeout)
    assert result.returncode == 0, result.stderr
    return result.json(), result


def codes(answer: dict[str, Any]) -> list[str]:
    return [f["code"] for f in answer["findings"]]


def finding(answer: dict[str, Any], code: str) -> dict[str, Any]:
    found = [f for f in answer["findings"] if f["code"] == code]
    assert found, f"no {code} in {codes(answer)}"
    return found[0]


def fake_secret() -> str:
    alphabet = string.ascii_letters + string.digits
    return "hf_" + "".join(secrets.choice(alphabet) for _ in range(30))


def write_bundle(path: Path, results: Sequence[ProbeResult]) -> Path:
    path.write_text(json.dumps(bundle(list(results))), encoding="utf-8")
    return path


def wrapper_interpreter(path: Path, pythonpath: Path, starts: Path | None = None) -> Path:
    """A stand-in for the user's training interpreter: traindoc's own Python with ``pythonpath`` first (a fake
    torch), recording each start in ``starts``."""
    real = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "python"
    record = f'echo start >> "{starts}"\n' if starts else ""
    path.write_text(f'#!/bin/sh\n{record}PYTHONPATH="{pythonpath}" exec "{real}" "$@"\n', encoding="utf-8")
    path.chmod(0o755)
    return path


def fake_bin(directory: Path, name: str, body: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / name
    script.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    script.chmod(0o755)
    return directory


def path_with(directory: Path) -> str:
    return f"{directory}{os.pathsep}{os.environ.get('PATH', '')}"


def nvml_answers() -> bool:
    """Whether a real NVML answers here (then GPU probes use it instead of the fake nvidia-smi)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        return True
    except Exception:
        return False


def assert_one_line_error(result: Run, prog: str, code: int = 1) -> None:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr + result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{prog}: error: "), result.stderr
    assert result.stdout.strip() == ""


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped) is dead for our purposes
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def spawn(args: Sequence[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(list(args), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
