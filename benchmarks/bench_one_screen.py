"""The answer on one screen (issue 26): is the cause and the first fix visible without scrolling, on every front end?

For 20 fixed inputs (10 pasted errors or questions in English and Chinese, 10 logs given with ``--log``):

- CLI: ``ask`` in a real pseudo-terminal at 80x24 and 120x40 (TERM, COLUMNS, LINES set, the window size set on
  the pty). Its output goes through a small terminal emulator (wrapping at the width, CJK as two cells, ``\\r``,
  erase-line and cursor-up as a progress line uses them). Two screens are judged: the LAST screen, what stays on
  the terminal when the command returns (the last rows-1 output rows and the prompt's row), and the FIRST screen
  (the typed command's row and the first rows-1 output rows).
- Web: ``traindoc web`` on 127.0.0.1 driven by Debian chromium through pip playwright (never ``playwright
  install``), one fresh browser context per input, at 1280x800 and 400x800: the question is submitted (or the log
  uploaded with an empty question) and, once answered, are the answer's "Cause:" line and its "First fix:" item (its
  command where it has one, else its words) inside both the chat box and the viewport, and on top (``elementFromPoint``), as the page stands
  (playwright scrolls the page just enough to press Ask, as a phone user must)? The web answer is judged by its own
  verdict (its server's probes see that host's live processes); where it differs from ``ask``'s, that is printed.
- Slack: the real ``traindoc slack`` against the fake Slack Web API of the tests; a mention (with the log as a file)
  is answered, and the cause and fix must be in the posted message's first two blocks.

What counts as "the cause" and "the first fix" is the answer's own verdict (``ask --json`` -> ``verdict``, run once
per input beside the screens: with probes for the CLI and the web, whose server probes its own host; with
``--no-probes`` for Slack, whose bot probes no host by default). The first 24 characters of its cause (citation
markers dropped) and of the first line of its fix are looked for, with whitespace, ``*``, ``_`` and backticks removed
on both sides (a wrapped or bold line still matches; one clipped within its first few words does not). An answer with
no verdict or no fix counts as not visible. The CLI runs with probes, as users get it, unless ``--no-probes``.

Prints one row per input and surface, the totals per surface, every miss with what that screen shows instead, and
the run time. ``--quick`` runs 5 inputs. The target (issue 26) is every cause and fix visible on the CLI's last
screen, the web at both widths and Slack.
"""

from __future__ import annotations

import fcntl
import html
import json
import os
import re
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import termios
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import REPO, clean_env, finish, parser, script, verdict  # noqa: E402

TESTS = REPO / "tests"
GPU_REAL = TESTS / "jobs" / "data" / "gpu-real"
JOB_DATA = TESTS / "jobs" / "data"
SAMPLES = REPO.parent / "shared" / "gpu-samples"
TERMINALS = ((80, 24), (120, 40))
BROWSER_SIZES = ((1280, 800), (400, 800))
SLACK_FIRST_BLOCKS = 2
KEY_CHARS = 24  # the first N non-blank characters of the cause / fix are what is looked for (a few words)
ASK_TIMEOUT_S = 240


@dataclass(frozen=True)
class Case:
    name: str
    question: str
    log: Path | None = None


PASTES = [
    Case("oom", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 0 has a total capacity "
                "of 23.64 GiB of which 402.19 MiB is free. Process 81121 has 23.23 GiB memory in use."),
    Case("nccl-no-iface", "NCCL WARN Bootstrap : no socket interface found\nNCCL error in: ProcessGroupNCCL.cpp:1269, "
                          "internal error, NCCL version 2.18.1"),
    Case("sm120", "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch "
                  "installation.\nRuntimeError: CUDA error: no kernel image is available for execution on the device"),
    Case("port-in-use", "torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
                        "network address. port: 29500, useIPv6: 0, code: -98, name: EADDRINUSE, "
                        "message: address already in use"),
    Case("ds-init-zh", "用 deepspeed 启动 8 卡训练，日志停在 [comm.py] Initializing TorchBackend in DeepSpeed with "
                       "backend nccl 之后就一直不动了，也没有报错，是什么原因？"),
    Case("nan-loss", "my loss becomes nan after about 2000 steps with fp16 mixed precision, grad norm goes inf first"),
    Case("vllm-kv", "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
                    "when initializing the engine."),
    Case("hang-q", "training hangs after the first epoch, GPU util 100% on all ranks but no progress, how do I find "
                   "where it is stuck?"),
    Case("torchrun-sigkill", "torch.distributed.elastic.multiprocessing.api:Sending process 4112 closing signal SIGTERM\n"
                             "torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 2 "
                             "(pid: 4114) of binary: /usr/bin/python3\nRoot Cause (first observed failure):\n"
                             "[0]:\n  rank      : 2 (local_rank: 2)\n  exitcode  : -9 (pid: 4114)\n"
                             "  error_file: <N/A>\n  traceback : Signal 9 (SIGKILL) received by PID 4114"),
    Case("local-rank-arg", "train.py: error: unrecognized arguments: --local-rank=0"),
]

LOGS = [
    Case("log:nccl-watchdog", "", SAMPLES / "nccl-watchdog-timeout.log"),
    Case("log:oom-crash", "", GPU_REAL / "oom_crash" / "console.log"),
    Case("log:nccl-dup-gpu", "", GPU_REAL / "nccl_duplicate_gpu" / "console.log"),
    Case("log:nan-anomaly", "", GPU_REAL / "nan_anomaly" / "console.log"),
    Case("log:gloo-straggler", "", GPU_REAL / "straggler_gloo_timeout" / "console.log"),
    Case("log:nccl-bootstrap", "", JOB_DATA / "pastes" / "nccl_bootstrap_no_interface.log"),
    Case("log:flash-attn", "", JOB_DATA / "pastes" / "flash_attn_illegal_access.log"),
    Case("log:shm-no-space", "", JOB_DATA / "ds-issues" / "nccl_shm_no_space.log"),
    Case("log:jit-fused-adam", "", JOB_DATA / "ds-issues" / "jit_fused_adam.log"),
    Case("log:py-spy-hang", "", SAMPLES / "py-spy-dump-native-waiting-on-gpu.txt"),
]

CASES = PASTES + LOGS
QUICK = ["oom", "ds-init-zh", "torchrun-sigkill", "log:nccl-watchdog", "log:shm-no-space"]


# -- what is looked for ---------------------------------------------------------------------------------------

CITATION = re.compile(r"\s*\[\d+\]")
IGNORED = re.compile(r"[\s*`_]+")
COMMENT = re.compile(r"\s+#\s.*$")  # a trailing shell comment: a summary line may drop it


def squeeze(text: str) -> str:
    """Text as compared: no whitespace, emphasis or code marks (a wrapped or bold line still matches)."""
    return IGNORED.sub("", text)


@dataclass
class Target:
    cause: str  # the verdict's cause, as written
    fix: str  # the first line of the verdict's fix
    cause_key: str = ""
    fix_key: str = ""

    def __post_init__(self) -> None:
        self.cause_key = squeeze(CITATION.sub("", self.cause))[:KEY_CHARS]
        self.fix_key = squeeze(COMMENT.sub("", self.fix))[:KEY_CHARS]


def target_of(answer: dict[str, Any]) -> Target:
    found = answer.get("verdict") or {}
    fix = next((line for line in str(found.get("fix") or "").splitlines() if line.strip()), "")
    return Target(str(found.get("cause") or ""), fix)


@dataclass
class Seen:
    cause: bool
    fix: bool
    instead: str = ""  # what the screen shows where a part is missing
    differs: str = ""  # the surface's own verdict, where it is not the reference's


def judged(target: Target, text: str, instead: str) -> Seen:
    flat = squeeze(text)
    cause = bool(target.cause_key) and target.cause_key in flat
    fix = bool(target.fix_key) and target.fix_key in flat
    return Seen(cause, fix, "" if cause and fix else instead)


# -- CLI in a pseudo-terminal ---------------------------------------------------------------------------------

CSI = re.compile(r"\x1b\[([0-9;?]*)([@-~])")
OSC = re.compile(r"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


class Terminal:
    """Just enough of a VT100 to see what a user sees: autowrap at the width, wide CJK cells, CR, LF, BS,
    erase in line/display, cursor up/down/column. Every row ever written is kept (the scrollback)."""

    def __init__(self, width: int) -> None:
        from rich.cells import get_character_cell_size

        self.width = width
        self.cell = get_character_cell_size
        self.rows: list[list[str]] = [[]]
        self.row = 0
        self.col = 0
        self.pending_wrap = False

    def feed(self, text: str) -> None:
        text = OSC.sub("", text)
        pos = 0
        for match in CSI.finditer(text):
            self._chars(text[pos:match.start()])
            self._control(match.group(1), match.group(2))
            pos = match.end()
        self._chars(text[pos:])

    def _line(self) -> list[str]:
        while len(self.rows) <= self.row:
            self.rows.append([])
        line = self.rows[self.row]
        while len(line) < self.col:
            line.append(" ")
        return line

    def _newline(self) -> None:
        self.row += 1
        self.pending_wrap = False
        self._line()

    def _chars(self, text: str) -> None:
        for char in text:
            if char == "\n":
                self._newline()
                self.col = 0
            elif char == "\r":
                self.col, self.pending_wrap = 0, False
            elif char == "\b":
                self.col, self.pending_wrap = max(0, self.col - 1), False
            elif char == "\t":
                self.col = min(self.width - 1, (self.col // 8 + 1) * 8)
            elif char == "\x1b" or (ord(char) < 32):
                continue
            else:
                size = self.cell(char)
                if size == 0:
                    continue
                if self.pending_wrap or self.col + size > self.width:
                    self._newline()
                    self.col = 0
                line = self._line()
                cells = [char] + [""] * (size - 1)  # a wide character's second cell is empty
                line[self.col:self.col + size] = cells
                self.col += size
                self.pending_wrap = self.col >= self.width  # the next printable starts a new row

    def _control(self, params: str, final: str) -> None:
        numbers = [int(p) for p in params.replace("?", "").split(";") if p.isdigit()]
        n = numbers[0] if numbers else 0
        if final == "K":
            line = self._line()
            if n == 0:
                del line[self.col:]
            elif n == 1:
                line[:self.col] = [" "] * min(self.col, len(line))
            else:
                line.clear()
        elif final == "A":
            self.row = max(0, self.row - max(1, n))
        elif final == "B":
            self.row += max(1, n)
            self._line()
        elif final == "G":
            self.col = max(0, min(self.width - 1, max(1, n) - 1))
        elif final == "J" and n == 2:
            self.rows, self.row, self.col = [[]], 0, 0
        self.pending_wrap = False
        if self.col > self.width:
            self.col = self.width

    def lines(self) -> list[str]:
        return ["".join(line).rstrip() for line in self.rows]


def run_in_pty(argv: list[str], env: dict[str, str], width: int, height: int) -> tuple[str, int]:
    """Run ``argv`` with a pty of ``width`` x ``height`` as stdin, stdout and stderr; return its output and status."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))
    full = dict(env, TERM="xterm-256color", COLUMNS=str(width), LINES=str(height))
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=full, cwd=REPO,
                            start_new_session=True)
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + ASK_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: every writer closed the pty
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break  # exited, and nothing more came for half a second (a leftover child may hold the pty)
        else:
            proc.kill()
    finally:
        os.close(master)
    code = proc.wait(timeout=30)
    return b"".join(chunks).decode("utf-8", errors="replace"), code


@dataclass
class Screens:
    first: list[str]
    last: list[str]
    total_rows: int


def screens_of(output: str, width: int, height: int, command: str) -> Screens:
    terminal = Terminal(width)
    terminal.feed(output)
    rows = terminal.lines()
    if rows and rows[-1] == "":
        rows = rows[:-1]  # the cursor's empty row: the prompt goes there
    while rows and rows[-1] == "":
        rows.pop()
    prompt = ["$ " + command[:width - 2]]
    first = prompt + rows[:height - 1]
    last = (prompt + rows)[-(height - 1):] + ["$ "]
    return Screens(first, last, len(rows))


def cli_argv(case: Case) -> list[str]:
    argv = [script("ask")]
    if case.log:
        argv += ["--log", str(case.log)]
    if case.question:
        argv.append(case.question)
    return argv


def slug_of(case: Case) -> str:
    return re.sub(r"[^\w-]+", "_", case.name)


def shown_command(case: Case) -> str:
    return f"ask --log {case.log.name}" if case.log else f"ask {case.question.splitlines()[0][:60]!r}"


def summary_of(rows: list[str], limit: int = 3) -> str:
    text = [row.strip() for row in rows if row.strip() and not row.startswith("$ ")]
    return " | ".join(text[:limit])[:220]


# -- web, in a real browser -----------------------------------------------------------------------------------

VISIBLE_JS = """
([causeKey, fixKey]) => {
  const squeeze = t => (t || '').replace(/[\\s*`_]+/g, '');
  const rows = document.querySelectorAll('#chat .bot-row');
  const row = rows[rows.length - 1];
  const said = [...row.querySelectorAll('.message')].filter(m => !m.querySelector('.thought-group'));
  const message = said[said.length - 1];
  const chat = document.querySelector('#chat').getBoundingClientRect();
  const top = Math.max(0, chat.top), bottom = Math.min(innerHeight, chat.bottom);
  const blocks = [...message.querySelectorAll('p, li')];
  const cause = blocks.find(el => /^(Cause|原因)[:：]/.test(squeeze(el.innerText))) || blocks[0] || null;
  const after = el => !cause || (cause.compareDocumentPosition(el) & Node.DOCUMENT_POSITION_FOLLOWING);
  // the verdict's "First fix" item: its command when it has one (what a user copies), else its words
  const first = blocks.find(el => /^(Firstfix|首先尝试)[:：]/.test(squeeze(el.innerText)));
  // (the command sits in the item, or right after the verdict's list when the renderer lifts it out)
  const lifted = el => {
    const next = el && el.closest('ul, ol') ? el.closest('ul, ol').nextElementSibling : null;
    if (!next) return null;
    if (next.tagName === 'PRE') return next;
    return next.querySelector('pre') && !next.querySelector('h1, h2, h3, h4, p, li') ? next.querySelector('pre') : null;
  };
  const fix = first ? (first.querySelector('pre') || lifted(first) || first)
                    : ([...message.querySelectorAll('pre')].find(after) || null);
  const inView = el => {
    if (!el) return false;
    const box = el.getBoundingClientRect();
    const line = Math.min(box.height, 18);
    if (box.top < top - 1 || box.top + line > bottom + 1 || box.left < 0 || box.left + 8 > innerWidth) return false;
    const hit = document.elementFromPoint(box.left + 4, box.top + line / 2);
    return !!hit && (el.contains(hit) || hit.contains(el) || message.contains(hit));
  };
  const atTop = document.elementFromPoint(chat.left + 40, top + 12);
  const lines = (message.innerText || '').split('\\n').filter(l => l.trim());
  return {cause: inView(cause), fix: inView(fix), causeFound: !!cause, fixFound: !!fix,
          causeText: cause ? cause.innerText.slice(0, 120) : '', fixText: fix ? fix.innerText.split('\\n')[0].slice(0, 120) : '',
          causeAsCli: !!cause && squeeze(cause.innerText).includes(causeKey),
          fixAsCli: !!fix && squeeze(fix.innerText).includes(fixKey),
          causeY: cause ? Math.round(cause.getBoundingClientRect().top) : null,
          fixY: fix ? Math.round(fix.getBoundingClientRect().top) : null,
          chatTop: Math.round(top), chatBottom: Math.round(bottom),
          atTop: atTop ? (atTop.innerText || '').trim().slice(0, 100) : '', firstLines: lines.slice(0, 3).join(' | ')};
}
"""


@dataclass
class WebRun:
    server: Any
    browser: Any
    kit: Any
    stop: Callable[[], None]


def start_web_run(base: Path, index: Path, no_probes: bool) -> WebRun:
    sys.path[:0] = [str(TESTS), str(TESTS / "web")]
    import web_server_kit as kit
    from browser_kit import BROWSER_ARGS, CHROMIUM
    from playwright.sync_api import sync_playwright

    server = kit.start_web(base, index, env={"TRAINDOC_PROBE_TIMEOUT": "10"})  # its own probes, as it has them
    playwright = sync_playwright().start()
    browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS)

    def stop() -> None:
        browser.close()
        playwright.stop()
        server.stop()

    return WebRun(server, browser, kit, stop)


def web_screen(run: WebRun, case: Case, target: Target, width: int, height: int, dump: Path | None) -> Seen:
    context = run.browser.new_context(viewport={"width": width, "height": height}, locale="en-US")
    try:
        page = context.new_page()
        page.set_default_timeout(60_000)
        page.goto(run.server.url)
        page.wait_for_selector("#question textarea:enabled")
        if case.log:
            page.set_input_files("#log input[type=file]", str(case.log))
            page.locator("#log", has_text=case.log.stem[:8]).wait_for()
        run.kit.ask(page, case.question)
        page.wait_for_timeout(400)  # the scroll-to-top runs after the turn's last update
        view = page.evaluate(VISIBLE_JS, [target.cause_key, target.fix_key])
        view["scrollY"] = page.evaluate("() => Math.round(scrollY)")
        if dump:
            page.screenshot(path=str(dump / f"{slug_of(case)}.web{width}.png"))
    finally:
        context.close()
    seen = Seen(bool(view["cause"]), bool(view["fix"]))
    if not view["causeAsCli"] or (target.fix_key and view["fixFound"] and not view["fixAsCli"]):
        seen.differs = f"web: cause {view['causeText'][:100]!r}, fix {view['fixText'][:80]!r}"
    if not (seen.cause and seen.fix):
        where = (f"cause {'not in the answer' if not view['causeFound'] else 'at y=' + str(view['causeY'])}, "
                 f"fix {'not in the answer' if not view['fixFound'] else 'at y=' + str(view['fixY'])}, "
                 f"chat box shown at y={view['chatTop']}..{view['chatBottom']}, page scrolled {view['scrollY']} px")
        seen.instead = f"{where}; top of the chat shows: {view['atTop'][:90]!r}; answer starts: {view['firstLines'][:160]!r}"
    return seen


def check_web_runs(run: WebRun, case: Case, target: Target, dump: Path | None) -> dict[str, Seen]:
    out = {}
    for width, height in BROWSER_SIZES:
        try:
            out[f"web {width}"] = web_screen(run, case, target, width, height, dump)
        except Exception as exc:  # noqa: BLE001 - a timeout or a page error is a miss, reported
            out[f"web {width}"] = Seen(False, False, f"error: {type(exc).__name__}: {str(exc)[:200]}")
    return out


# -- Slack, against the fake Web API --------------------------------------------------------------------------

@dataclass
class SlackRun:
    fake: Any
    bot: Any
    kit: Any
    stop: Callable[[], None]


def start_slack_run(base: Path, index: Path, no_probes: bool) -> SlackRun:
    sys.path[:0] = [str(TESTS), str(TESTS / "slack")]
    import slack_kit as kit
    from fakes.slack_api import FakeSlack

    fake = FakeSlack().__enter__()
    data = base / "data"
    shutil.copytree(index, data)
    extra = {"TRAINDOC_SLACK_RATE": "1000", "TRAINDOC_SLACK_MAX_FILE_MB": "5"}  # host probes off: its default
    bot = kit.start_bot(fake, kit.bot_env(base, data, fake, extra), base)

    def stop() -> None:
        kit.stop(bot.process)
        fake.__exit__(None, None, None)

    return SlackRun(fake, bot, kit, stop)


def blocks_of(params: dict[str, Any]) -> list[dict[str, Any]]:
    blocks = params.get("blocks") or []
    return json.loads(blocks) if isinstance(blocks, str) else list(blocks)


def slack_message(run: SlackRun, case: Case, target: Target) -> Seen:
    from fakes.slack_api import iter_blocks_text

    extra: dict[str, Any] = {}
    text = case.question
    if case.log:
        name = f"{run.kit.new_ts()}-{case.log.name}"
        data = case.log.read_bytes()
        url = run.fake.add_file(name, data)
        extra["files"] = [{"id": "F" + name[-8:].replace(".", ""), "name": case.log.name, "size": len(data),
                           "url_private_download": url}]
        text = text or "log attached"
    event = run.kit.mention(text, user=run.kit.new_user(), **extra)
    assert run.bot.event(run.kit.event_callback(event)).status == 200
    params = run.bot.answer_to(event["ts"], timeout=ASK_TIMEOUT_S)
    blocks = blocks_of(params)
    first = html.unescape("\n".join(iter_blocks_text(blocks[:SLACK_FIRST_BLOCKS])))  # mrkdwn escapes <, >, &
    seen = judged(target, first, "")
    if not (seen.cause and seen.fix):
        texts = [html.unescape("\n".join(iter_blocks_text([block]))) for block in blocks]
        where = {part: next((i for i, t in enumerate(texts) if key and key in squeeze(t)), None)
                 for part, key in (("cause", target.cause_key), ("fix", target.fix_key))}
        seen.instead = (f"{len(blocks)} blocks; cause in block {where['cause']}, fix in block {where['fix']} "
                        f"(None: not in the message); first blocks: {first[:240]!r}")
    return seen


# -- the run --------------------------------------------------------------------------------------------------

@dataclass
class Row:
    case: Case
    target: Target  # the verdict with probes as the CLI runs them (the web's server probes its host too)
    target_no_probes: Target  # the verdict without host probes: Slack's default (TRAINDOC_SLACK_PROBES unset)
    seen: dict[str, Seen] = field(default_factory=dict)


def reference(case: Case, env: dict[str, str], no_probes: bool) -> Target:
    argv = cli_argv(case)
    argv.insert(1, "--json")
    if no_probes:
        argv.insert(1, "--no-probes")
    result = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=ASK_TIMEOUT_S,
                            stdin=subprocess.DEVNULL, check=False)
    if result.returncode != 0:
        return Target("", "")
    try:
        return target_of(json.loads(result.stdout))
    except json.JSONDecodeError:
        return Target("", "")


def cli_screens(case: Case, target: Target, env: dict[str, str], no_probes: bool, dump: Path | None) -> dict[str, Seen]:
    out: dict[str, Seen] = {}
    argv = cli_argv(case)
    if no_probes:
        argv.insert(1, "--no-probes")
    for width, height in TERMINALS:
        output, code = run_in_pty(argv, env, width, height)
        screens = screens_of(output, width, height, shown_command(case))
        size = f"{width}x{height}"
        if dump:
            for which, rows in (("first", screens.first), ("last", screens.last)):
                (dump / f"{slug_of(case)}.{size}.{which}.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")
        for name, rows in (("last", screens.last), ("first", screens.first)):
            seen = judged(target, "\n".join(rows), "")
            if not (seen.cause and seen.fix):
                seen.instead = f"{screens.total_rows} rows, exit {code}; screen shows: {summary_of(rows)!r}"
            out[f"cli {size} {name}"] = seen
    return out


def mark(seen: Seen | None) -> str:
    if seen is None:
        return "  -  "
    return ("C" if seen.cause else "c") + "/" + ("F" if seen.fix else "f")


def report(rows: list[Row], surfaces: list[str], elapsed: float, strict: bool) -> int:
    print("\nC/F = cause / first fix visible without scrolling; lower case = not visible")
    width = max(len(r.case.name) for r in rows) + 1
    print(f"{'input':<{width}}" + "".join(f"{s:>20}" for s in surfaces))
    for row in rows:
        print(f"{row.case.name:<{width}}" + "".join(f"{mark(row.seen.get(s)):>20}" for s in surfaces))
    totals: dict[str, tuple[int, int, int]] = {}
    for surface in surfaces:
        seen = [r.seen[surface] for r in rows if surface in r.seen]
        totals[surface] = (sum(s.cause for s in seen), sum(s.fix for s in seen), len(seen))
    print(f"{'total':<{width}}" + "".join(f"{f'{c}/{n} {f}/{n}':>20}" for c, f, n in totals.values()))
    print("\nThe verdict each input was judged by (ask --json):")
    for row in rows:
        print(f"  {row.case.name}: cause {row.target.cause[:90]!r}; fix {row.target.fix[:90]!r}")
        if (row.target.cause_key, row.target.fix_key) != (row.target_no_probes.cause_key, row.target_no_probes.fix_key):
            print(f"    without probes (Slack's): cause {row.target_no_probes.cause[:90]!r}; "
                  f"fix {row.target_no_probes.fix[:90]!r}")
    print("\nMisses (what the screen shows instead):")
    misses = 0
    for row in rows:
        for surface in surfaces:
            seen = row.seen.get(surface)
            if seen and not (seen.cause and seen.fix):
                misses += 1
                lost = " and ".join(p for p, ok in (("cause", seen.cause), ("fix", seen.fix)) if not ok)
                print(f"  {row.case.name} @ {surface}: no {lost}: {seen.instead}")
    if not misses:
        print("  none")
    differing = [(row.case.name, s, row.seen[s].differs) for row in rows for s in surfaces
                 if s in row.seen and row.seen[s].differs]
    if differing:
        print("\nWhere the web answered another verdict than `ask` (judged by its own first Cause line and first code block):")
        for name, surface, what in differing:
            print(f"  {name} @ {surface}: {what}")
    print(f"\nrun time {elapsed:.0f} s for {len(rows)} inputs")
    judged_surfaces = [s for s in surfaces if not s.endswith(" first")]
    results = []
    for surface in judged_surfaces:
        c, f, n = totals[surface]
        results.append(verdict(f"cause and first fix on one screen: {surface}", c == n and f == n,
                               f"cause {c}/{n}, fix {f}/{n}").startswith("PASS"))
    return finish(strict, results)


def main() -> int:
    p = parser(__doc__.splitlines()[0], runs=None)
    p.add_argument("--quick", action="store_true", help=f"only {len(QUICK)} inputs")
    p.add_argument("--no-probes", action="store_true", help="answer without live probes (default: with, as users get)")
    p.add_argument("--surfaces", default="cli,web,slack", help="comma-separated: cli, web, slack (default: all)")
    p.add_argument("--only", default="", help="comma-separated input names to run")
    p.add_argument("--dump", type=Path, help="write every CLI screen (first and last, per size) as text, and every web page as a PNG, here")
    args = p.parse_args()
    wanted = set(args.surfaces.split(","))
    cases = [c for c in CASES if c.name in QUICK] if args.quick else CASES
    if args.only:
        cases = [c for c in CASES if c.name in args.only.split(",")]
    for case in cases:
        if case.log and not case.log.exists():
            raise SystemExit(f"{case.log} is missing")
    if args.dump:
        args.dump.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    surfaces: list[str] = []
    if "cli" in wanted:
        surfaces += [f"cli {w}x{h} {which}" for w, h in TERMINALS for which in ("last", "first")]
    if "web" in wanted:
        surfaces += [f"web {w}" for w, _ in BROWSER_SIZES]
    if "slack" in wanted:
        surfaces.append("slack")
    print(f"{len(cases)} inputs, probes {'off' if args.no_probes else 'on (the default)'}; surfaces: {', '.join(surfaces)}",
          flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-one-screen-") as tmp:
        base = Path(tmp)
        env = clean_env(TRAINDOC_DATA_DIR=str(base / "data"), HF_HUB_OFFLINE="1", GRADIO_ANALYTICS_ENABLED="False",
                        TRAINDOC_FEEDBACK_DB=str(base / "feedback.sqlite3"), LANG="C.UTF-8")
        for key in ("NO_COLOR", "LC_ALL"):
            env.pop(key, None)
        subprocess.run([script("traindoc"), "index"], env=env, cwd=REPO, check=True, capture_output=True,
                       stdin=subprocess.DEVNULL)
        rows = [Row(case, reference(case, env, args.no_probes), reference(case, env, True)) for case in cases]
        print(f"reference verdicts: {time.perf_counter() - started:.0f} s", flush=True)
        if "cli" in wanted:
            for row in rows:
                row.seen.update(cli_screens(row.case, row.target, env, args.no_probes, args.dump))
            print(f"cli done: {time.perf_counter() - started:.0f} s", flush=True)
        for name, starter, check in (("web", start_web_run, check_web_runs), ("slack", start_slack_run, None)):
            if name not in wanted:
                continue
            run = starter(base / name, base / "data", args.no_probes)
            try:
                for row in rows:
                    if check is not None:
                        row.seen.update(check(run, row.case, row.target, args.dump))
                    else:
                        try:
                            row.seen["slack"] = slack_message(run, row.case, row.target_no_probes)
                        except Exception as exc:  # noqa: BLE001 - reported as a miss
                            row.seen["slack"] = Seen(False, False, f"error: {type(exc).__name__}: {str(exc)[:200]}")
            finally:
                run.stop()
            print(f"{name} done: {time.perf_counter() - started:.0f} s", flush=True)
    return report(rows, surfaces, time.perf_counter() - started, args.strict)


if __name__ == "__main__":
    sys.exit(main())
