"""Cold starts against `python -c "import torch"`, same interpreter, as ratios measured in the same run: `ask --json
--no-probes` <= 0.15x the time and <= 70 MiB peak RSS (issue 39), the same with `--log` of a real 3-rank torchrun
log (~120 lines) <= 0.6x, `traindoc probe --json` <= 1.0x.

Setup (untimed): a fresh temp data dir (TRAINDOC_DATA_DIR) indexed with `traindoc index` (seeds only;
TRAINDOC_* settings of the caller are dropped), then one untimed run of each command so that both
start from a warm OS page cache: "cold" here means a new process, not an empty disk cache. Bytecode is
cached as an installed package caches it (PYTHONDONTWRITEBYTECODE is dropped; the .pyc files go to a temp
PYTHONPYCACHEPREFIX, written by the untimed runs): without it every run would compile the project's modules.
One more row times `ask` with the caller's own bytecode settings (PYTHONDONTWRITEBYTECODE kept, no prefix): the
cold start a user gets from the README's setup, whose `make` compiles the project's modules once. The setup also
writes the regex snapshot as `make` does (common/regex_snapshot.py).

Timed: N runs (default 5) of each command, interleaved (torch, ask, torch, ask, ...), wall time from
spawn to reaped exit; medians compared. The peak RSS of each process (``ru_maxrss`` from ``wait4``) is
printed beside torch's, as a ratio too.

Then (``--no-explain`` skips it) the ask runs once under ``-X importtime`` and once under cProfile, and
the top costs are printed: where the next regression comes from. Last (``--no-quality`` skips it), the
cross-validated quality of the same index and model, `traindoc eval --cv 5` over the dev set, is printed
beside the timings, so that a speed-up that costs answers shows in the same run.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    PYTHON,
    check,
    clean_env,
    finish,
    fmt_s,
    median,
    parser,
    run_timed,
    script,
    verdict,
)

QUESTION = "NCCL watchdog timeout after 10 minutes on 8 GPUs"  # issue 39's
MAX_RSS_MIB = 70.0  # the cold ask's peak memory, issue 39
DEV_SET = Path(__file__).resolve().parents[2] / "shared" / "eval" / "dev.jsonl"
JOB_LOG = Path(__file__).resolve().parent / "data" / "three-rank-keyerror.log"  # real torchrun output, 3 ranks


def ask_cmd() -> list[str]:
    return [script("ask"), "--json", "--no-probes", QUESTION]


def commands() -> list[tuple[str, list[str], float]]:
    """(name, command, target ratio to import torch)."""
    return [
        ("ask --json --no-probes", ask_cmd(), 0.15),
        ("ask --json --no-probes --log (3 ranks)", [script("ask"), "--json", "--no-probes", "--log", str(JOB_LOG)], 0.6),
        ("traindoc probe --json", [script("traindoc"), "probe", "--json"], 1.0),
    ]


def torch_cmd() -> list[str]:
    return [PYTHON, "-c", "import torch"]


def explain(env: dict[str, str]) -> None:
    print("\n-- where the cold ask spends its time --")
    result = check(run_timed([PYTHON, "-X", "importtime", *ask_cmd()], env), "ask under -X importtime")
    rows = []
    for line in result.stderr.decode(errors="replace").splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \| ( *)(\S+)", line)
        if m:
            rows.append((int(m.group(1)), int(m.group(2)), len(m.group(3)), m.group(4)))
    total_self = sum(r[0] for r in rows)
    print(f"imports: {len(rows)} modules, {total_self / 1e6:.2f} s in module bodies (importtime, inflated)")
    by_package: dict[str, int] = defaultdict(int)
    for self_us, _, _, name in rows:
        by_package[name.split(".")[0]] += self_us
    top = sorted(by_package.items(), key=lambda kv: -kv[1])[:12]
    print("  by top-level package (self time summed): " + ", ".join(f"{k} {v / 1e3:.0f} ms" for k, v in top))
    outer = sorted((r for r in rows if r[2] <= 1), key=lambda r: -r[1])[:10]
    print("  outermost imports by cumulative time: " + ", ".join(f"{r[3]} {r[1] / 1e3:.0f} ms" for r in outer))

    import pstats

    with tempfile.TemporaryDirectory() as tmp:
        prof = Path(tmp) / "ask.prof"
        check(run_timed([PYTHON, "-m", "cProfile", "-o", str(prof), *ask_cmd()], env), "ask under cProfile")
        stats = pstats.Stats(str(prof))
        total = stats.total_tt  # type: ignore[attr-defined]
        print(f"cProfile: {total:.2f} s profiled (profiling overhead inflates pure-Python code)")
        entries = []
        for (filename, line, func), (_, _, tottime, cumtime, _) in stats.stats.items():  # type: ignore[attr-defined]
            entries.append((cumtime, tottime, f"{_short(filename)}:{line}({func})"))
        interesting = [e for e in entries if "importlib" not in e[2] and "built-in method builtins.exec" not in e[2]]
        print("  top cumulative (project and library functions):")
        for cum, tot, where in sorted(interesting, key=lambda e: -e[0])[:22]:
            print(f"    {cum:6.2f} s cum  {tot:6.2f} s self  {where}")
        print("  top self time:")
        for cum, tot, where in sorted(entries, key=lambda e: -e[1])[:10]:
            print(f"    {tot:6.2f} s self  {cum:6.2f} s cum  {where}")


def quality(env: dict[str, str]) -> None:
    """`traindoc eval --cv 5` on the index just timed: held-out figures, mean and worst fold."""
    if not DEV_SET.exists():
        print(f"quality: skipped ({DEV_SET} not found)")
        return
    result = check(run_timed([script("traindoc"), "eval", "--cv", "5", "--json", str(DEV_SET)], env), "traindoc eval --cv 5")
    hybrid = json.loads(result.stdout)["modes"]["hybrid"]
    for row in ("mean", "worst"):
        figures = hybrid[row]
        print(f"quality (traindoc eval --cv 5, {row} fold): R@1 {figures['R@1']:.2f}, R@3 {figures['R@3']:.2f}, "
              f"negatives answered no_match {figures['negatives']:.2f}, false no_match {figures['false_no_match']:.1%}")


def _short(filename: str) -> str:
    for marker in ("site-packages/", "/work/main/", "lib/python3"):
        if marker in filename:
            return filename.split(marker, 1)[1]
    return filename


def main() -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--no-explain", action="store_true", help="skip the importtime and cProfile breakdown")
    p.add_argument("--no-quality", action="store_true", help="skip the cross-validated quality figures")
    args = p.parse_args()
    print(f"== cold starts vs import torch (N={args.runs}, interleaved, medians)")
    data_dir = Path(tempfile.mkdtemp(prefix="traindoc-bench-cold-"))
    env = clean_env(TRAINDOC_DATA_DIR=str(data_dir), PYTHONPYCACHEPREFIX=str(data_dir / "pycache"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    as_set_up = clean_env(TRAINDOC_DATA_DIR=str(data_dir))  # bytecode as `make` left it, the caller's settings
    written = as_set_up.get("PYTHONDONTWRITEBYTECODE", "")
    as_set_up_name = f"ask --json --no-probes, bytecode as set up (PYTHONDONTWRITEBYTECODE={written!r})"
    oks = []
    try:
        built = check(run_timed([script("traindoc"), "index"], env), "traindoc index")
        print(f"setup: traindoc index in {built.wall_s:.2f} s: {built.stdout.decode().strip()}")
        warm = check(run_timed([PYTHON, "-m", "traindoc_cli.regex_warmup"], env), "regex warm-up")  # as `make` does
        print(f"setup: {warm.stdout.decode().strip()}")
        for name, cmd, _ in commands():  # warm the page cache, and check each works
            check(run_timed(cmd, env), name)
        check(run_timed(torch_cmd(), env), "import torch")
        torch_s: list[float] = []
        torch_rss: list[float] = []
        times: dict[str, list[float]] = {name: [] for name, _, _ in commands()}
        rss: dict[str, list[float]] = {name: [] for name, _, _ in commands()}
        set_up_s: list[float] = []
        for _ in range(args.runs):
            torch_run = check(run_timed(torch_cmd(), env), "import torch")
            torch_s.append(torch_run.wall_s)
            torch_rss.append(torch_run.max_rss_mb)
            for name, cmd, _ in commands():
                result = check(run_timed(cmd, env), name)
                times[name].append(result.wall_s)
                rss[name].append(result.max_rss_mb)
            set_up_s.append(check(run_timed(ask_cmd(), as_set_up), as_set_up_name).wall_s)
        base, base_rss = median(torch_s), median(torch_rss)
        print(f"python -c 'import torch': median {base:.2f} s  [{fmt_s(torch_s)}]  peak RSS {base_rss:.0f} MiB")
        for name, _, target in commands():
            cold, memory = median(times[name]), median(rss[name])
            ratio = cold / base
            print(f"{name}: median {cold:.2f} s  [{fmt_s(times[name])}]  peak RSS {memory:.0f} MiB "
                  f"= {memory / base_rss:.2f}x import torch's")
            ok = ratio <= target
            oks.append(ok)
            verdict(name, ok, f"{cold:.2f} s = {ratio:.2f}x import torch ({base:.2f} s), target <= {target}x")
            if name == commands()[0][0]:
                fits = memory <= MAX_RSS_MIB
                oks.append(fits)
                verdict(f"{name} peak RSS", fits, f"{memory:.0f} MiB = {memory / base_rss:.2f}x import torch's "
                                                  f"({base_rss:.0f} MiB), target <= {MAX_RSS_MIB:.0f} MiB")
        print(f"{as_set_up_name}: median {median(set_up_s):.2f} s  [{fmt_s(set_up_s)}] = "
              f"{median(set_up_s) / base:.2f}x import torch (information: what the README's setup gives)")
        if not args.no_quality:
            quality(env)
        if not args.no_explain:
            explain(env)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    return finish(args.strict, oks)


if __name__ == "__main__":
    sys.exit(main())
