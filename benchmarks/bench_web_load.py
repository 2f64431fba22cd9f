"""A load round on the web chat (issue 40 point 4): short questions' latency and the server's memory, idle and under
load, as ratios in the same run.

Starts `traindoc web` on a free 127.0.0.1 port (index built in a temp data dir). Idle: one user asks the short
questions of bench_web.py one after another (p50/p95). Load round: `--users` users (default 20) ask those questions
with a think time between them (`--think`, default 3 s) while `--hostile` users (default 4) send pastes: one past the
message limit (refused at once) and one long log under it (read as a log: real work). The server's resident memory
(/proc/<pid>/status VmRSS) is read before the round and `--settle` seconds after it. Targets: short questions' p95
under load <= 2x idle p95; memory after the round within 20% of before; every short answer cites its expected
section.
"""

from __future__ import annotations

import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import finish, parser, verdict  # noqa: E402
from bench_web import CASES, correct, start_server, stop, wait_until_serving  # noqa: E402


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def long_log(lines: int) -> str:
    rows = [f"[rank{r % 8}]:step {i} loss {1 / (i + 1):.4f} lr 3e-4" for i, r in enumerate(range(lines))]
    return "\n".join(rows + ["[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"])


def main() -> int:
    ap = parser(__doc__.splitlines()[0], runs=1)
    ap.add_argument("--users", type=int, default=20)
    ap.add_argument("--hostile", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=90)
    ap.add_argument("--think", type=float, default=3.0)
    ap.add_argument("--settle", type=float, default=15.0)
    args = ap.parse_args()
    from gradio_client import Client

    over_limit = "NCCL WARN Call to connect returned Connection refused\n" * 100_000  # ~5 MB
    under_limit = long_log(2_500)  # ~110 KB: read as a log, a real answer
    with tempfile.TemporaryDirectory() as tmp:
        server, url = start_server(Path(tmp))
        wrong: list[str] = []
        try:
            wait_until_serving(url, server)
            client = Client(url, verbose=False)
            for question, _ in CASES:  # warm up
                client.predict(question, api_name="/ask")
            idle: list[float] = []
            for _ in range(2):
                for question, expected in CASES:
                    started = time.perf_counter()
                    answer = client.predict(question, api_name="/ask")
                    idle.append(time.perf_counter() - started)
                    wrong += [] if correct(answer, expected) else [f"idle: {question}"]
            before = rss_mb(server.pid)
            loaded: list[float] = []
            hostile_done = [0]
            lock = threading.Lock()
            deadline = time.monotonic() + args.seconds

            def user(seed: int) -> None:
                mine = Client(url, verbose=False)
                rng = random.Random(seed)
                time.sleep(rng.uniform(0, args.think))
                while time.monotonic() < deadline:
                    question, expected = rng.choice(CASES)
                    started = time.perf_counter()
                    answer = mine.predict(question, api_name="/ask")
                    elapsed = time.perf_counter() - started
                    with lock:
                        loaded.append(elapsed)
                        wrong.extend([] if correct(answer, expected) else [f"load: {question}"])
                    time.sleep(rng.uniform(0.5, 1.5) * args.think)

            def hostile(seed: int) -> None:
                mine = Client(url, verbose=False)
                while time.monotonic() < deadline:
                    mine.predict(over_limit if seed % 2 else under_limit, api_name="/ask")
                    with lock:
                        hostile_done[0] += 1

            threads = [threading.Thread(target=user, args=(i,)) for i in range(args.users)]
            threads += [threading.Thread(target=hostile, args=(i,)) for i in range(args.hostile)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            time.sleep(args.settle)
            after = rss_mb(server.pid)
        finally:
            stop(server)
    idle_p95, load_p95 = p95(idle), p95(loaded)
    print(f"idle            : p50 {statistics.median(idle) * 1000:.0f} ms, p95 {idle_p95 * 1000:.0f} ms ({len(idle)} answers)")
    print(f"{args.users} users + {args.hostile} hostile: p50 {statistics.median(loaded) * 1000:.0f} ms, p95 "
          f"{load_p95 * 1000:.0f} ms ({len(loaded)} answers; {hostile_done[0]} hostile requests)")
    print(f"server memory   : {before:.0f} MB before the round, {after:.0f} MB {args.settle:g} s after "
          f"({after / before:.2f}x)")
    checks = [
        verdict("short questions' p95 under load <= 2x idle", load_p95 <= 2 * idle_p95, f"{load_p95 / idle_p95:.2f}x"),
        verdict("memory back within 20% of before", after <= 1.2 * before, f"{after / before:.2f}x"),
        verdict("every short answer cites its expected section", not wrong, f"{len(wrong)} wrong" + (f": {wrong[:3]}" if wrong else "")),
    ]
    return finish(args.strict, [c.startswith("PASS") for c in checks])


if __name__ == "__main__":
    sys.exit(main())
