"""Nothing traindoc reads back from disk can run code as the user who reads it (issue 40, point 2): no pickle (the
index's chunks were a ``chunks.pkl`` that whoever could write the data folder could turn into code), no
``numpy.load(allow_pickle=True)``, no ``yaml.load`` without the safe loader, no marshal or shelve, no ``torch.load``
without ``weights_only``. Read from the source of every package, so a new use anywhere fails here."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("advice", "agent", "common", "corpus", "incidents", "jobs", "runbooks", "tools", "traindoc_cli",
            "traindoc_slack", "traindoc_web", "checks")
UNSAFE_MODULES = {"pickle", "cPickle", "_pickle", "dill", "cloudpickle", "joblib", "marshal", "shelve"}


def _sources() -> list[Path]:
    return sorted(p for package in PACKAGES if (ROOT / package).is_dir() for p in (ROOT / package).rglob("*.py"))


def _problems(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Import):
            found += [f"{where}: import {a.name}" for a in node.names if a.name.split(".")[0] in UNSAFE_MODULES]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in UNSAFE_MODULES:
            found.append(f"{where}: from {node.module} import")
        elif isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            keywords = {k.arg: ast.unparse(k.value) for k in node.keywords}
            if keywords.get("allow_pickle") not in (None, "False"):
                found.append(f"{where}: {name}(allow_pickle={keywords['allow_pickle']})")
            if name.endswith("yaml.load") and "safe" not in keywords.get("Loader", "").lower():
                found.append(f"{where}: yaml.load without SafeLoader")
            if name.endswith("torch.load") and keywords.get("weights_only") != "True":
                found.append(f"{where}: torch.load without weights_only=True")
    return found


def test_no_code_running_format_is_read_back_from_disk() -> None:
    sources = _sources()
    assert len(sources) > 50  # the packages were found
    assert [problem for path in sources for problem in _problems(path)] == []


def test_the_check_finds_what_it_looks_for(tmp_path: Path) -> None:
    sample = ROOT / "tests" / "security" / "_sample_unsafe.py"
    text = ("import pickle\nfrom shelve import open\nimport numpy as np\nimport yaml\nimport torch\n"
            "np.load('x', allow_pickle=True)\nyaml.load(s)\ntorch.load('m.pt')\nnp.load('y')\n")
    sample.write_text(text, encoding="utf-8")
    try:
        found = _problems(sample)
    finally:
        sample.unlink()
    assert len(found) == 5, found
