"""The regex snapshot (common/regex_snapshot.py): the patterns a cold `ask` compiles, kept as the SRE code `re` made
for them. A pattern made from the snapshot equals the one `re` compiles (`==` on patterns compares their code and
flags), the real warm-up over the CLI's own questions writes such a snapshot, and a file from another interpreter,
a damaged one or none at all is no snapshot: `re` compiles as before."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from clikit import ROOT

from common.regex_snapshot import read, recording, write

python_compile = re._compiler.compile  # type: ignore[attr-defined]

PATTERNS = [
    (r"(?P<kind>CUDA|NCCL) error: (?P<what>[^\n]{1,200})", 0),
    (r"^\s*\[rank(\d+)\]:", re.MULTILINE),
    (r"out of memory|显存不足|内存溢出", re.IGNORECASE),
    (r"(?<![A-Za-z0-9_])sm_(\d{2,3})(?!\d)", 0),
    (r"[A-Za-z0-9+/=]{0,128}+", 0),
    (r"(?i:token)\s*[:=]\s*(?P<value>\S++)", re.ASCII),
    (r"(a|b)*?c(?=d)", re.DOTALL | re.VERBOSE),
]
TEXTS = ["CUDA error: an illegal memory access", "[rank3]: RuntimeError", "  [rank12]: x", "CUDA OUT OF MEMORY",
         "训练时显存不足", "built for sm_80 and sm_900", "TOKEN = abc/def+==", "ababcd", "nothing here"]


def test_a_pattern_from_the_snapshot_is_the_pattern_re_compiles(tmp_path: Path) -> None:
    path = tmp_path / "snap.bin"
    assert write(path, PATTERNS) == len(PATTERNS)
    snapshot = read(path)
    assert snapshot is not None and len(snapshot) == len(PATTERNS)
    for pattern, flags in PATTERNS:
        made, compiled = snapshot.compiled(pattern, flags), python_compile(pattern, flags)
        assert made == compiled  # the same code, flags and pattern
        assert made.groupindex == compiled.groupindex and made.groups == compiled.groups
        for text in TEXTS:
            got, want = made.search(text), compiled.search(text)
            assert (got and (got.span(), got.groups())) == (want and (want.span(), want.groups()))
    assert snapshot.compiled(PATTERNS[0][0], re.IGNORECASE) is None  # the flags are part of the key
    assert snapshot.compiled("never stored", 0) is None


def test_the_warm_up_records_what_the_cli_compiles_and_every_entry_is_re_s_own(tmp_path: Path, index_copy: Path) -> None:
    """The real warm-up (the CLI's fixed questions against the repo's index, or none): each stored pattern's code is
    what `re` compiles for it in this interpreter."""
    path = tmp_path / "warm.bin"
    run = subprocess.run([sys.executable, "-m", "traindoc_cli.regex_warmup", str(path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=600,
                         env={**__import__("os").environ, "TRAINDOC_DATA_DIR": str(index_copy)})
    assert run.returncode == 0, run.stderr
    snapshot = read(path)
    assert snapshot is not None and len(snapshot) > 100  # the secret shapes and failure families alone are hundreds
    header = json.loads(path.read_bytes().partition(b"\n")[0])
    for pattern, flags, *_ in header["entries"]:
        assert snapshot.compiled(pattern, flags) == python_compile(pattern, flags), pattern[:80]


def test_another_interpreter_s_or_a_damaged_snapshot_is_none(tmp_path: Path) -> None:
    path = tmp_path / "snap.bin"
    write(path, PATTERNS)
    head, _, body = path.read_bytes().partition(b"\n")
    header = json.loads(head)
    header["stamp"]["python"] = "3.99.0 (another build)"
    other = tmp_path / "other.bin"
    other.write_bytes(json.dumps(header).encode() + b"\n" + body)
    assert read(other) is None
    truncated = tmp_path / "truncated.bin"
    truncated.write_bytes(head + b"\n" + body[: len(body) // 2])
    assert read(truncated) is None  # an entry's code would run past the end
    for damaged in (b"", b"\x00\xff garbage", head[:40], b"[]\n", b'{"stamp": 1}\n'):
        (tmp_path / "d.bin").write_bytes(damaged)
        assert read(tmp_path / "d.bin") is None
    assert read(tmp_path / "missing.bin") is None


def test_recording_sees_each_compile_once_and_undoes_itself() -> None:
    inner = re._compiler.compile  # type: ignore[attr-defined]
    with recording() as seen:
        re.compile("traindoc-recording-test-[0-9]+")
        re.compile("traindoc-recording-test-[a-z]+", re.I)
    assert ("traindoc-recording-test-[0-9]+", 0) in seen
    assert ("traindoc-recording-test-[a-z]+", int(re.I)) in seen
    assert re._compiler.compile is inner  # type: ignore[attr-defined]


def test_installed_re_compiles_from_the_snapshot_and_everything_else_as_before(tmp_path: Path) -> None:
    """In a fresh interpreter: a stored pattern comes from the snapshot (its Python compiler is never called), any
    other pattern from `re` as always, and both match as `re`'s own."""
    path = tmp_path / "snap.bin"
    write(path, PATTERNS)
    code = (
        "import re, sys\n"
        "from common.regex_snapshot import install\n"
        f"assert install(__import__('pathlib').Path({str(path)!r})) == {len(PATTERNS)}\n"
        "from re import _parser\n"
        "calls = []\n"
        "parse = _parser.parse\n"
        "_parser.parse = lambda *a, **k: (calls.append(a[0]), parse(*a, **k))[1]\n"
        f"stored = re.compile({PATTERNS[0][0]!r})\n"
        "assert not calls, calls\n"
        "assert stored.search('NCCL error: unhandled system error').group('what') == 'unhandled system error'\n"
        "other = re.compile('not-in-the-snapshot-([0-9]+)')\n"
        "assert calls == ['not-in-the-snapshot-([0-9]+)'], calls\n"
        "assert other.match('not-in-the-snapshot-42').group(1) == '42'\n"
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
