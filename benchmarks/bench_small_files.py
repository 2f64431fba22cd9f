"""Many small files in `traindoc index` (issue 27): milliseconds per small file against milliseconds per chunk of
one big document with as many sections, both indexed in the same run, in-process, with the real model and store.

A small file is one chunk, so a build that batches across files costs about the same per small file as per chunk
of a big document; one that pays a store write and a cache shard per file costs many times that. Each round
indexes N small files, then one N-section document, each into its own copy of an index of the built-in documents
(so only the new chunks are timed), twice: with their vectors already in the embedding cache ("cached": what
the indexer itself costs, the target) and without ("cold": the model's cost, about 1 ms a token here, is the
same for both and dominates). Texts differ from round to round. Target: the median cached ratio **<= 2x**.

    .venv/bin/python benchmarks/bench_small_files.py [-n 3] [--files 300] [--strict]
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks._common import fmt_s, median, parser, verdict  # noqa: E402

TARGET_RATIO = 2.0


def _note(round_no: int, i: int) -> str:
    return (f"Rank {i} of run {round_no} stops at step {i * 7}: check host node-{i % 13}, its NCCL_SOCKET_IFNAME "
            f"and whether the link to switch {i % 5} drops packets (case {round_no}-{i}).")


def _small_files(folder: Path, round_no: int, count: int) -> None:
    folder.mkdir(parents=True)
    for i in range(count):
        (folder / f"note-{i:05d}.md").write_text(f"# Note {i}\n\n{_note(round_no, i)}\n", encoding="utf-8")


def _big_document(folder: Path, round_no: int, count: int) -> None:
    folder.mkdir(parents=True)
    sections = "".join(f"\n## Note {i}\n\n{_note(round_no + 1000, i)}\n" for i in range(count))
    (folder / "field-notes.md").write_text("# Field notes\n" + sections, encoding="utf-8")


def _timed_index(settings, embedder, data: Path, corpus: Path) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    from corpus.indexer import build_index

    run = replace(settings, data_dir=data, corpus_paths=(*settings.corpus_paths, corpus))
    start = time.perf_counter()
    report = build_index(run, lambda: embedder, progress=False)
    return time.perf_counter() - start, report.chunks_written


def _round(settings, embedder, room: Path, round_no: int, files: int) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """{"cached": ratio, "cold": ratio, ...}: one round, both corpora indexed cold and then cached."""
    _small_files(room / "small", round_no, files)
    _big_document(room / "big", round_no, files)
    result: dict[str, float] = {}
    for mode in ("cold", "cached"):
        timings: dict[str, float] = {}
        for name in ("small", "big"):
            data = room / f"{mode}-{name}"
            shutil.copytree(settings.data_dir, data)
            if mode == "cached":  # the vectors the cold run embedded: only the indexer's own work is left
                shutil.copytree(room / f"cold-{name}" / "cache", data / "cache", dirs_exist_ok=True)
            seconds, chunks = _timed_index(settings, embedder, data, room / name)
            timings[name] = 1000 * seconds / max(chunks, 1)
        result[mode] = timings["small"] / timings["big"]
        result[f"{mode}_small_ms"], result[f"{mode}_big_ms"] = timings["small"], timings["big"]
        print(f"round {round_no}, {mode:6s}: {files} small files {timings['small']:.1f} ms/file; one document of "
              f"{files} sections {timings['big']:.1f} ms/chunk; ratio {result[mode]:.2f}x", flush=True)
    return result


def main() -> int:
    args = parser(__doc__.splitlines()[0], runs=3)
    args.add_argument("--files", type=int, default=300, help="small files (and big-document sections) per round")
    opts = args.parse_args()
    from common.settings import Settings
    from corpus.embedding import make_embedder
    from corpus.indexer import build_index

    scratch = Path(tempfile.mkdtemp(prefix="traindoc-bench-small-"))
    try:
        settings = replace(Settings.from_env(), data_dir=scratch / "base")
        embedder = make_embedder(settings.embed_model, settings.cache_dir)
        build_index(settings, lambda: embedder, progress=False)  # the built-in documents: the base all start from
        print(f"== many small files in `traindoc index` (N={opts.runs}, {opts.files} files vs one "
              f"{opts.files}-section document; target cached ratio <= {TARGET_RATIO:.0f}x)")
        rounds = []
        for round_no in range(opts.runs):
            rounds.append(_round(settings, embedder, scratch / f"round{round_no}", round_no, opts.files))
            shutil.rmtree(scratch / f"round{round_no}", ignore_errors=True)
        for mode in ("cold", "cached"):
            ratios = [r[mode] for r in rounds]
            print(f"{mode:6s}: small file median {median([r[f'{mode}_small_ms'] for r in rounds]):.1f} ms, "
                  f"big-document chunk median {median([r[f'{mode}_big_ms'] for r in rounds]):.1f} ms, "
                  f"ratio median {median(ratios):.2f}x [{fmt_s(ratios)}]")
        ratio = median([r["cached"] for r in rounds])
        ok = ratio <= TARGET_RATIO
        verdict("small files", ok, f"{ratio:.2f}x the per-chunk cost of one big document, the vectors cached "
                f"(target <= {TARGET_RATIO:.0f}x)")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 1 if opts.strict and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
