"""The project's own package failing to import is its own kind (runbook own_package_import): each line Python prints
for it picks the runbook, alone or as a traceback's last line, "No module named 'mypkg'" included; a CUDA library
that does not load, a pip build that fails and a library whose API changed keep their own runbooks. The messages,
and the causes and fixes the runbook names, are checked against the running interpreter on a tiny package built in
a temporary folder (the shadowing hints of Python 3.13 and later are checked as text only)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from runbook_messages import assert_a_line_per_message, assert_picks

from runbooks.catalog import runbooks
from runbooks.choose import for_lines

KIND = "own_package_import"

# One real-shaped line per message in the runbook's front matter (the same order), as CPython prints it.
LINES = [
    "AttributeError: module 'random' has no attribute 'randint' (consider renaming '/work/repo/random.py' since it has "
    "the same name as the standard library module named 'random' and the import system gives it precedence)",
    "ImportError: attempted relative import with no known parent package",
    "ImportError: attempted relative import beyond top-level package",
    "/opt/venv/bin/python: Error while finding module specification for 'mypkg.train' (ModuleNotFoundError: No module "
    "named 'mypkg')",
    "/opt/venv/bin/python: No module named mypkg.__main__; 'mypkg' is a package and cannot be directly executed",
    "AttributeError: partially initialized module 'mypkg.data' has no attribute 'Collator' (most likely due to a "
    "circular import)",
    "ImportError: cannot import name 'build_model' from partially initialized module 'mypkg.models' (most likely due "
    "to a circular import) (/work/repo/mypkg/models/__init__.py)",
    "AttributeError: module 'wandb' has no attribute 'init' (consider renaming '/work/repo/wandb.py' if it has the "
    "same name as a third-party module you intended to import)",
    "ModuleNotFoundError: No module named 'mypkg.data'; 'mypkg' is not a package",
    "ModuleNotFoundError: No module named 'mypkg'",
]

TRACEBACK = [
    "[rank0]: Traceback (most recent call last):",
    '[rank0]:   File "/work/repo/scripts/train.py", line 7, in <module>',
    "[rank0]:     from mypkg.models import build_model",
    "[rank0]: ModuleNotFoundError: No module named 'mypkg'",
    "E1127 10:00:00.000000 812 torch/distributed/elastic/multiprocessing/api.py:882] failed (exitcode: 1) "
    "local_rank: 0 (pid: 813) of binary: /opt/venv/bin/python",
]

NEIGHBOURS = {
    "cuda_lib_import": "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory",
    "package_build": "  × Getting requirements to build wheel did not run successfully.",
}
# pip's isolated build of a package that imports torch in its setup.py: the pip lines, not the missing module, name it
PIP_BUILD = [
    "  × Getting requirements to build wheel did not run successfully.",
    "  │ exit code: 1",
    "      ModuleNotFoundError: No module named 'torch'",
]
# a name removed from a library: the path is in site-packages, no line of this kind's
LIBRARY_NAME = ("ImportError: cannot import name 'is_torch_fx_available' from 'transformers.utils' "
                "(/opt/venv/lib/python3.11/site-packages/transformers/utils/__init__.py)")


def test_every_message_has_a_line_here_and_both_languages_list_the_same_ones() -> None:
    assert_a_line_per_message(KIND, LINES)


@pytest.mark.parametrize("line", LINES)
def test_each_line_python_prints_picks_the_runbook(line: str) -> None:
    assert_picks(KIND, [line])


def test_a_bare_missing_module_line_picks_it_by_itself() -> None:
    assert_picks(KIND, ["No module named 'mypkg'"])


def test_a_rank_traceback_ending_in_the_missing_package_picks_it() -> None:
    assert_picks(KIND, TRACEBACK)


def test_no_module_named_is_listed_as_a_message_other_failures_print_too() -> None:
    assert runbooks()[(KIND, "en")].messages[-1] == "No module named"


@pytest.mark.parametrize(("kind", "line"), NEIGHBOURS.items())
def test_a_neighbouring_failure_keeps_its_own_runbook(kind: str, line: str) -> None:
    chosen = for_lines([line])
    assert chosen is not None and chosen.kind == kind, (line, chosen and chosen.kind)


def test_a_pip_build_that_misses_torch_stays_a_build_failure() -> None:
    chosen = for_lines(PIP_BUILD)
    assert chosen is not None and chosen.kind == "package_build", chosen and chosen.kind


def test_a_name_removed_from_a_library_does_not_pick_it() -> None:
    chosen = for_lines([LIBRARY_NAME])
    assert chosen is None or chosen.kind != KIND, chosen.kind


# --- the causes and fixes, on a real interpreter -------------------------------------------------------------------


def _repo(root: Path) -> Path:
    """A repository that was never installed: mypkg/ at its root, a script in scripts/ that imports it."""
    files = {
        "mypkg/__init__.py": "",
        "mypkg/data.py": "from .models import build_model\n",
        "mypkg/models.py": "def build_model():\n    return 'model'\n",
        "mypkg/train.py": "from .data import build_model\nprint(build_model())\n",
        "mypkg/deep.py": "from ...elsewhere import thing\n",
        "mypkg/cycle_a.py": "from mypkg.cycle_b import B\nA = 1\n",
        "mypkg/cycle_b.py": "from mypkg.cycle_a import A\nB = 2\n",
        "mypkg/lazy_a.py": "from mypkg.lazy_b import B\nA = 1\n",
        "mypkg/lazy_b.py": "def get_a():\n    from mypkg.lazy_a import A\n    return A\nB = 2\n",
        "scripts/train.py": "from mypkg.data import build_model\nprint(build_model())\n",
        "flat/utils.py": "X = 1\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    return root


def _run(args: list[str], cwd: Path, pythonpath: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH", "PYTHONSTARTUP")}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def _message(index: int) -> str:
    return runbooks()[(KIND, "en")].messages[index]


def _fails_with(done: subprocess.CompletedProcess[str], index: int) -> str:
    assert done.returncode != 0
    assert _message(index) in done.stderr, done.stderr[-600:]
    last = done.stderr.strip().splitlines()[-1]
    assert_picks(KIND, [last])
    return last


def test_a_script_outside_the_package_misses_it_until_the_root_is_on_the_path(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    last = _fails_with(_run(["scripts/train.py"], repo), -1)
    assert last == "ModuleNotFoundError: No module named 'mypkg'"
    fixed = _run(["scripts/train.py"], repo, pythonpath=str(repo))
    assert fixed.returncode == 0 and fixed.stdout.strip() == "model", fixed.stderr


def test_a_package_file_run_by_its_path_has_no_parent_but_runs_with_m(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    _fails_with(_run(["mypkg/train.py"], repo), 1)
    fixed = _run(["-m", "mypkg.train"], repo)
    assert fixed.returncode == 0 and fixed.stdout.strip() == "model", fixed.stderr


def test_a_relative_import_above_the_top_package_fails(tmp_path: Path) -> None:
    _fails_with(_run(["-c", "import mypkg.deep"], _repo(tmp_path)), 2)


def test_m_from_another_directory_cannot_find_the_module(tmp_path: Path) -> None:
    _repo(tmp_path / "repo")
    done = _run(["-m", "mypkg.train"], tmp_path)
    assert _message(3) in done.stderr and "No module named 'mypkg'" in done.stderr, done.stderr


def test_m_on_a_package_without_main_is_refused(tmp_path: Path) -> None:
    done = _run(["-m", "mypkg"], _repo(tmp_path))
    assert done.returncode != 0 and _message(4) in done.stderr, done.stderr


def test_a_top_level_from_import_cycle_fails_and_a_deferred_import_does_not(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    last = _fails_with(_run(["-c", "import mypkg.cycle_a"], repo), 6)
    assert _message(5) in last
    fixed = _run(["-c", "import mypkg.lazy_a, mypkg.lazy_b; print(mypkg.lazy_b.get_a())"], repo)
    assert fixed.returncode == 0 and fixed.stdout.strip() == "1", fixed.stderr


def test_a_module_where_a_package_is_expected_is_not_a_package(tmp_path: Path) -> None:
    _fails_with(_run(["-c", "import utils.io"], _repo(tmp_path) / "flat"), 8)


def test_the_check_shows_what_the_package_name_resolves_to(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    check = "import importlib.util as u; print(u.find_spec('mypkg'))"
    assert _run(["-c", check], repo / "scripts").stdout.strip() == "None"
    assert str(repo / "mypkg" / "__init__.py") in _run(["-c", check], repo).stdout
