"""Load on the web UI: 8 simultaneous sessions on loopback, each answered correctly.

Starts `traindoc web` on a free 127.0.0.1 port (index built in a temp data dir), then asks 8 questions
whose right first citation (file and section) is known: first one session asking them one after another
(the baseline), then 8 sessions at once (gradio_client, one client per thread). Every answer, in both
phases, must cite its expected section (after the runbook of its kind). Prints the median answer time of each phase and the ratio
concurrent / single. There is no fixed target for the ratio.
"""

from __future__ import annotations

import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, clean_env, finish, parser, script, verdict  # noqa: E402

# question -> (cited file prefix, last heading of the first citation)
CASES = [
    ("RuntimeError: Address already in use on port 29500", ("002_", "错误2: 端口被占用")),
    ("RTX 5090 sm_120 is not compatible with the current PyTorch installation", ("000_", "错误1: CUDA兼容性问题（主要问题）")),
    ("Watchdog caught collective operation timeout after 600000 ms", ("004_", "问题：NCCL 超时")),
    ("vLLM: No available memory for the cache blocks", ("004_", "问题：vLLM 引擎引发的 OOM")),
    ("loss becomes NaN with fp16", ("004_", "问题：Loss 或梯度值为 NaN")),
    ("saving the checkpoint fails: No space left on device", ("004_", "问题：保存检查点失败")),
    ("MoE expert load imbalance", ("001_", "问题 5: MoE (Mixture of Experts) 相关问题")),
    ("unrecognized arguments: --local_rank", ("001_", "问题 6: 命令行参数解析错误")),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def correct(answer: dict, expected: tuple[str, str]) -> bool:
    """The answer cites the expected seed section (after the runbook of its kind, which leads since issue 24)."""
    return any(Path(c["source"]).name.startswith(expected[0]) and c["section"].split(" > ")[-1] == expected[1]
               for c in answer.get("citations") or [])


def wait_until_serving(url: str, server: subprocess.Popen, timeout: float = 150) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if server.poll() is not None:
            raise SystemExit(f"traindoc web exited with {server.returncode}")
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise SystemExit("traindoc web did not start") from None
            time.sleep(0.3)


def stop(server: subprocess.Popen) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(server.pid, sig)
            server.wait(timeout=15)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def start_server(tmp: Path) -> tuple[subprocess.Popen, str]:
    """`traindoc web` on a free loopback port over an index built in ``tmp`` (its own group: ``stop`` ends it)."""
    env = clean_env(TRAINDOC_DATA_DIR=str(tmp / "data"), TRAINDOC_FEEDBACK_DB=str(tmp / "fb.sqlite3"),
                    GRADIO_ANALYTICS_ENABLED="False", TRAINDOC_PROBE_TIMEOUT="5")
    subprocess.run([script("traindoc"), "index"], env=env, check=True, capture_output=True, cwd=REPO)
    port = free_port()
    server = subprocess.Popen([script("traindoc"), "web", "--port", str(port)], env=env, cwd=REPO,
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)
    return server, f"http://127.0.0.1:{port}/"


def main() -> int:
    args = parser(__doc__.splitlines()[0], runs=2).parse_args()
    from gradio_client import Client

    local = threading.local()

    def ask(url: str, question: str, expected: tuple[str, str]) -> tuple[float, bool]:
        if getattr(local, "client", None) is None:  # one session per thread, made before the clock starts
            local.client = Client(url, verbose=False)
        started = time.perf_counter()
        answer = local.client.predict(question, api_name="/ask")
        return time.perf_counter() - started, correct(answer, expected)

    with tempfile.TemporaryDirectory() as tmp:
        server, url = start_server(Path(tmp))
        try:
            wait_until_serving(url, server)
            for question, expected in CASES:  # warm up: first use of each probe, the embedder, the queue
                ask(url, question, expected)
            single: list[float] = []
            wrong: list[str] = []
            for _ in range(args.runs):
                for question, expected in CASES:
                    elapsed, ok = ask(url, question, expected)
                    single.append(elapsed)
                    wrong += [] if ok else [f"single: {question}"]
            concurrent: list[float] = []
            for _ in range(args.runs):
                barrier = threading.Barrier(len(CASES))

                def session(case: tuple[str, tuple[str, str]], barrier: threading.Barrier = barrier) -> tuple[float, bool]:
                    if getattr(local, "client", None) is None:
                        local.client = Client(url, verbose=False)
                    barrier.wait()  # all 8 sessions ask at the same moment
                    return ask(url, *case)

                with ThreadPoolExecutor(max_workers=len(CASES)) as pool:
                    results = list(pool.map(session, CASES))
                concurrent += [elapsed for elapsed, _ in results]
                wrong += [f"concurrent: {q}" for (q, _), (_, ok) in zip(CASES, results, strict=True) if not ok]
        finally:
            stop(server)
    single_median, concurrent_median = statistics.median(single), statistics.median(concurrent)
    print(f"single session : median {single_median * 1000:.0f} ms over {len(single)} answers")
    print(f"8 at once      : median {concurrent_median * 1000:.0f} ms over {len(concurrent)} answers "
          f"(max {max(concurrent) * 1000:.0f} ms)")
    print(f"ratio concurrent / single = {concurrent_median / single_median:.2f}x ({os.cpu_count()} cores)")
    ok = verdict("every answer cites its expected section", not wrong,
                 f"{len(single) + len(concurrent) - len(wrong)}/{len(single) + len(concurrent)} correct" +
                 (f"; wrong: {wrong}" if wrong else ""))
    return finish(args.strict, [ok.startswith("PASS")])


if __name__ == "__main__":
    sys.exit(main())
