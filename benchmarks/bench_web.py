"""Load on the web UI: 8 simultaneous sessions on loopback, each answered correctly.

Starts `traindoc web` on a free 127.0.0.1 port (index built in a temp data dir), then asks 8 questions
whose right section is known, first one session at a time (the baseline), then 8 sessions at once
(gradio_client in 8 threads). Prints the median answer time of each and the ratio concurrent/single.
There is no fixed target for the ratio; every concurrent answer must cite its expected section.
"""

from __future__ import annotations

import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, clean_env, finish, parser, script, verdict  # noqa: E402

CASES = [
    ("why is NCCL hanging at init", "002_"),
    ("torchrun: RuntimeError: Address already in use", "端口"),
    ("RTX 5090 sm_120 is not compatible with the current PyTorch installation", "CUDA兼容性"),
    ("CUDA out of memory with ZeRO-3, what can I do?", "显存"),
    ("Watchdog caught collective operation timeout after 600000 ms", "超时"),
    ("vLLM: No available memory for the cache blocks", "vLLM"),
    ("loss becomes NaN with fp16", "NaN"),
    ("saving the checkpoint fails: No space left on device", "保存检查点"),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ask_once(url: str, question: str, expected: str) -> tuple[float, bool]:
    from gradio_client import Client

    client = Client(url, verbose=False)
    started = time.perf_counter()
    answer = client.predict(question, api_name="/ask")
    elapsed = time.perf_counter() - started
    sections = [c["section"] + c["source"] for c in answer.get("citations", [])[:3]]
    return elapsed, any(expected in s for s in sections)


def main() -> int:
    args = parser(__doc__.splitlines()[0], runs=2).parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = clean_env(TRAINDOC_DATA_DIR=str(Path(tmp) / "data"), TRAINDOC_FEEDBACK_DB=str(Path(tmp) / "fb.db"),
                        GRADIO_ANALYTICS_ENABLED="False", TRAINDOC_PROBE_TIMEOUT="5")
        subprocess.run([script("traindoc"), "index"], env=env, check=True, capture_output=True, cwd=REPO)
        port = free_port()
        server = subprocess.Popen([script("traindoc"), "web", "--port", str(port)], env=env, cwd=REPO,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        url = f"http://127.0.0.1:{port}/"
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    urllib.request.urlopen(url, timeout=2).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise SystemExit("traindoc web did not start") from None
                    time.sleep(0.3)
            ask_once(url, "warm up", "")
            single: list[float] = []
            for _ in range(args.runs):
                for question, expected in CASES:
                    elapsed, _ = ask_once(url, question, expected)
                    single.append(elapsed)
            concurrent: list[float] = []
            correct = True
            for _ in range(args.runs):
                with ThreadPoolExecutor(max_workers=len(CASES)) as pool:
                    results = list(pool.map(lambda case: ask_once(url, *case), CASES))
                concurrent += [elapsed for elapsed, _ in results]
                correct &= all(ok for _, ok in results)
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=20)
    single_median, concurrent_median = statistics.median(single), statistics.median(concurrent)
    print(f"single session : median {single_median * 1000:.0f} ms over {len(single)} answers")
    print(f"8 at once      : median {concurrent_median * 1000:.0f} ms over {len(concurrent)} answers")
    print(f"ratio concurrent / single = {concurrent_median / single_median:.2f}x (2 cores)")
    ok = verdict("8 simultaneous sessions answered correctly", correct, f"{len(concurrent)} answers")
    return finish(args.strict, [ok.startswith("PASS")])


if __name__ == "__main__":
    sys.exit(main())
