"""A load round on the web chat (issue 40 point 4): short questions' latency and the server's memory, idle and under
load, as ratios in the same run.

Starts `traindoc web` on a free 127.0.0.1 port (index built in a temp data dir). Idle: one user asks the short
questions of bench_web.py one after another (p50/p95). Load round: `--users` users (default 20) ask those questions
with a think time between them (`--think`, default 3 s) while `--hostile` users (default 4) send pastes: one past the
message limit (refused at once) and one long log under it (read as a log: real work). The server's resident memory
(/proc/<pid>/status VmRSS) is read before the round and `--settle` seconds after it, and so is its worker process's
(traindoc_web.worker: the long pastes are answered there, started by the first one). Each round also prints the CPU
the server, its worker and this script's own clients took (a share of one core) and how busy the machine's cores
were, everyone's work included: on a shared machine that says whether a slow round was the server's own work or a
wait for a core. `--control` first runs a round of the users alone (no hostile users), to tell what the hostile users
add from what the users' own load costs; `--hostile-nice 19` runs the hostile users' client threads at that priority
(their own encoding of 5 MB pastes then yields the cores the server under test needs, as a remote attacker's costs it
nothing). Targets: short questions' p95 under load <= 2x idle p95; memory after the round within 20% of before;
every short answer cites its expected section.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "web"))

from _common import finish, parser, verdict  # noqa: E402
from bench_web import CASES, correct, start_server, stop, wait_until_serving  # noqa: E402
from web_server_kit import child_pids  # noqa: E402  (the tests' reading of a server's worker process)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def workers_mb(pid: int) -> float:
    total = 0.0
    for child in child_pids(pid):  # its worker, once a long paste started it
        try:
            total += rss_mb(child)
        except OSError:  # it ended meanwhile
            continue
    return total


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def long_log(lines: int) -> str:
    rows = [f"[rank{r % 8}]:step {i} loss {1 / (i + 1):.4f} lr 3e-4" for i, r in enumerate(range(lines))]
    return "\n".join(rows + ["[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"])


def cpu_s(pid: int) -> float:
    """A process's CPU time so far (user + system), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of every core since boot (/proc/stat): the machine's load, other users' included."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    return sum(values) - idle, sum(values)


@dataclass
class Round:
    """One load round: the short questions' latencies, the hostile requests answered, the CPU it took."""

    loaded: list[float]
    hostile: int
    server_cpu_s: float
    worker_cpu_s: float
    client_cpu_s: float  # this benchmark's own users (gradio clients on threads): they share the machine's cores
    machine_busy: float  # the share of every core busy during the round (this run's processes and everyone else's)
    seconds: float

    def line(self, name: str) -> str:
        cores = os.cpu_count() or 1
        return (f"{name}: p50 {statistics.median(self.loaded) * 1000:.0f} ms, p95 {p95(self.loaded) * 1000:.0f} ms "
                f"({len(self.loaded)} answers; {self.hostile} hostile requests); server {self.server_cpu_s / self.seconds:.0%} "
                f"of a core, worker {self.worker_cpu_s / self.seconds:.0%}, the clients {self.client_cpu_s / self.seconds:.0%}; "
                f"the machine's {cores} cores "
                f"{self.machine_busy:.0%} busy")


def load_round(url: str, server: Any, args: argparse.Namespace, hostile_users: int, wrong: list[str]) -> Round:
    from gradio_client import Client

    over_limit = "NCCL WARN Call to connect returned Connection refused\n" * 100_000  # ~5 MB
    under_limit = long_log(2_500)  # ~110 KB: read as a log, a real answer
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
        if args.hostile_nice:  # this thread (and the client threads it starts) yields the cores: a remote attacker's
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), args.hostile_nice)  # client costs us nothing
        mine = Client(url, verbose=False)
        while time.monotonic() < deadline:
            mine.predict(over_limit if seed % 2 else under_limit, api_name="/ask")
            with lock:
                hostile_done[0] += 1

    threads = [threading.Thread(target=user, args=(i,)) for i in range(args.users)]
    threads += [threading.Thread(target=hostile, args=(i,)) for i in range(hostile_users)]
    server_cpu, worker_cpu, busy, started = cpu_s(server.pid), workers_cpu_s(server.pid), machine_ticks(), time.monotonic()
    client_cpu = cpu_s(os.getpid())
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    busy_after = machine_ticks()
    share = (busy_after[0] - busy[0]) / max(1, busy_after[1] - busy[1])
    return Round(loaded, hostile_done[0], cpu_s(server.pid) - server_cpu, workers_cpu_s(server.pid) - worker_cpu,
                 cpu_s(os.getpid()) - client_cpu, share, elapsed)


def workers_cpu_s(pid: int) -> float:
    total = 0.0
    for child in child_pids(pid):  # its worker, once a long paste started it
        try:
            total += cpu_s(child)
        except OSError:
            continue
    return total


def main() -> int:
    ap = parser(__doc__.splitlines()[0], runs=1)
    ap.add_argument("--users", type=int, default=20)
    ap.add_argument("--hostile", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=90)
    ap.add_argument("--think", type=float, default=3.0)
    ap.add_argument("--settle", type=float, default=15.0)
    ap.add_argument("--control", action="store_true",
                    help="first a round of the users alone: what the hostile users add, apart from the users' own load")
    ap.add_argument("--hostile-nice", type=int, default=0,
                    help="the hostile users' client threads at this nice value: on a 2-core machine their own JSON "
                         "encoding of 5 MB pastes competes with the server under test, as a remote attacker's does not")
    args = ap.parse_args()
    from gradio_client import Client

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
            before, workers_before = rss_mb(server.pid), workers_mb(server.pid)
            control = load_round(url, server, args, 0, wrong) if args.control else None
            round_ = load_round(url, server, args, args.hostile, wrong)
            time.sleep(args.settle)
            after, workers_after = rss_mb(server.pid), workers_mb(server.pid)
        finally:
            stop(server)
    idle_p95, load_p95 = p95(idle), p95(round_.loaded)
    print(f"idle            : p50 {statistics.median(idle) * 1000:.0f} ms, p95 {idle_p95 * 1000:.0f} ms ({len(idle)} answers)")
    if control is not None:
        print(control.line(f"{args.users} users alone"))
    print(round_.line(f"{args.users} users + {args.hostile} hostile"))
    print(f"server memory   : {before:.0f} MB before the round, {after:.0f} MB {args.settle:g} s after "
          f"({after / before:.2f}x)")
    print(f"worker process  : {workers_before:.0f} MB before the round, {workers_after:.0f} MB after (server and worker "
          f"together: {before + workers_before:.0f} -> {after + workers_after:.0f} MB)")
    checks = [
        verdict("short questions' p95 under load <= 2x idle", load_p95 <= 2 * idle_p95, f"{load_p95 / idle_p95:.2f}x"),
        verdict("memory back within 20% of before", after <= 1.2 * before, f"{after / before:.2f}x"),
        verdict("every short answer cites its expected section", not wrong, f"{len(wrong)} wrong" + (f": {wrong[:3]}" if wrong else "")),
    ]
    if control is not None:  # not a target: what the hostile users cost the others, the users' own load set apart
        print(f"the hostile users' cost: p95 {load_p95 / p95(control.loaded):.2f}x the users' alone")
    return finish(args.strict, [c.startswith("PASS") for c in checks])


if __name__ == "__main__":
    sys.exit(main())
