"""``python -m traindoc_cli.regex_warmup``: write the regex snapshot (common/regex_snapshot.py) from what the CLI
compiles while answering a few fixed questions of its own: a question in English and one in Chinese, a pasted
traceback, a pasted multi-rank log, with and without the probes. ``make`` runs it after the index is built; it
never sees a user's question. Answers go nowhere; a question that fails (no index yet) still leaves what the
others compiled."""

from __future__ import annotations

import contextlib
import io
import sys

from common.regex_snapshot import default_path, recording, write

QUESTIONS: tuple[tuple[str, ...], ...] = (
    ("--json", "--no-probes", "NCCL watchdog timeout after 10 minutes on 8 GPUs"),
    ("--no-probes", "训练卡住了，显存不足 CUDA out of memory 怎么办"),
    ("--json", "--no-probes", "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
     "    import deepspeed\nModuleNotFoundError: No module named 'deepspeed'"),
    ("--no-probes", "[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
     "[rank0]:[E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout\n"
     "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: train.py FAILED"),
    ("--format", "markdown", "why is NCCL hanging"),
    ("why is NCCL hanging",),
)


def main(argv: list[str] | None = None) -> int:
    """``[PATH]``: where to write the snapshot (default: beside the project's bytecode, where the CLI reads it)."""
    from pathlib import Path

    from traindoc_cli.main import ask_main

    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0]) if args else default_path()
    with recording() as seen:
        for question in QUESTIONS:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                try:
                    ask_main(list(question))
                except (Exception, SystemExit):  # no index yet, or another failure: the rest still count
                    pass
    try:
        count = write(path, seen)
    except OSError as exc:
        print(f"regex snapshot not written ({exc.strerror or exc}): {path}", file=sys.stderr)
        return 0
    print(f"regex snapshot: {count} patterns in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
