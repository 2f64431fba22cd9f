"""The sweep's three worst inputs (issue 27), timed against an ordinary log read in the same run.

- an 80 KB question: a pasted log with a prose opening, read as ask() reads it before retrieval
  (agent.logs.long_question, the quote rule, the search text);
- a gzip bomb: a 1 MB .gz of one repeated byte that expands to 1 GB, through `ask --log`'s reader
  (refused in one line: jobs.reader's decompressed cap and its expansion ratio);
- a 200 MB line followed by an OOM line: read by the job reader, the OOM still found.

Each is printed as seconds, seconds per MB of input, and peak memory (of a child process, so one input's
memory does not hide another's), beside a 100 MB plain log of ordinary lines as the baseline. The targets are
the issue's: at most 2 s per MB of input and 1 GB of memory.

    .venv/bin/python benchmarks/bench_adversarial.py
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_S_PER_MB = 2.0
TARGET_PEAK_MB = 1024
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"

CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
kind, path = sys.argv[2], sys.argv[3]
from pathlib import Path
from agent.core import Question  # imported before the clock starts: the input's cost, not Python's
from agent.logs import long_question, read_logs
from common.errors import TraindocError
t0 = time.perf_counter()
said = ""
try:
    if kind == "question":
        text = open(path, encoding="utf-8").read()
        asked, reading = long_question(text)
        question = Question(text=asked, log_errors=reading.errors, job=reading.diagnosis, probes=False)
        question.search_text(); question.needs_a_quote()
        said = (reading.diagnosis.root_cause.category if reading.diagnosis and reading.diagnosis.root_cause else "none")
    else:
        reading = read_logs([Path(path)], question="why did it crash")
        root = reading.diagnosis.root_cause if reading.diagnosis else None
        said = root.category if root else ("OOM line found" if any("OutOfMemory" in e for e in reading.errors) else "none")
except TraindocError as exc:
    said = "refused: " + str(exc).splitlines()[0][:90]
seconds = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "peak_mb": peak, "said": said}))
"""


def _run(kind: str, path: Path) -> dict[str, object]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", CHILD, str(REPO), kind, str(path)], capture_output=True, text=True,
                         env=env, check=True, timeout=900)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _inputs(folder: Path) -> list[tuple[str, str, Path]]:
    step = "".join(f"[rank0]: step {i} loss 2.{i % 10} lr 1e-4 tokens/s 5321\n" for i in range(2000))
    question = folder / "question.txt"
    question.write_text("why did my job die after a few hours?\n" + (step * 2)[:80_000 - 200] + f"[rank0]: {OOM}\n",
                        encoding="utf-8")
    bomb = folder / "bomb.log.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as handle:
        block = b"A" * (1 << 20)
        for _ in range(1024):  # 1 GB expanded, about 1 MB on disk
            handle.write(block)
    long_line = folder / "long_line.log"
    with long_line.open("w", encoding="utf-8") as handle:
        chunk = "x" * (1 << 20)
        for _ in range(200):  # one 200 MB line
            handle.write(chunk)
        handle.write(f"\n[rank0]: {OOM}\n")
    plain = folder / "plain.log"
    with plain.open("w", encoding="utf-8") as handle:
        for _ in range(100 * (1 << 20) // len(step)):
            handle.write(step)
        handle.write(f"[rank0]: {OOM}\n")
    return [("question", "80 KB question", question), ("log", ".gz bomb (1 MB -> 1 GB)", bomb),
            ("log", "200 MB line, then an OOM line", long_line), ("log", "baseline: 100 MB ordinary log", plain)]


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        rows = []
        for kind, label, path in _inputs(Path(folder)):
            size_mb = path.stat().st_size / 2**20
            result = _run(kind, path)
            rows.append((label, size_mb, result))
    baseline = rows[-1][2]["seconds"] / rows[-1][1]  # type: ignore[operator]
    print(f"{'input':<34}{'MB':>8}{'s':>8}{'s/MB':>8}{'x base':>8}{'peak MB':>9}  result")
    ok = True
    for label, size_mb, result in rows:
        seconds, peak = float(result["seconds"]), float(result["peak_mb"])  # type: ignore[arg-type]
        per_mb = seconds / max(size_mb, 1e-9)
        ok &= per_mb <= TARGET_S_PER_MB and peak <= TARGET_PEAK_MB
        print(f"{label:<34}{size_mb:>8.2f}{seconds:>8.2f}{per_mb:>8.3f}{per_mb / baseline:>8.2f}{peak:>9.0f}  {result['said']}")
    print(f"{'PASS' if ok else 'FAIL'}: every input at most {TARGET_S_PER_MB} s per MB and {TARGET_PEAK_MB} MB of memory")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
