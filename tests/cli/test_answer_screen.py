"""The answer on one screen: the verdict first, each finding once under where it was seen, code never wrapped,
text to paste when the output is not a terminal, CJK emphasis that renders, and in an 80x24 terminal the cause
and the first fix visible at the top and the summary last. Rendered with the real renderers: rich, and
markdown-it-py (CommonMark, what Gradio's markdown follows)."""

from __future__ import annotations

import io
import re

import pytest
from markdown_it import MarkdownIt
from rich.cells import cell_len
from rich.console import Console
from rich.markdown import Markdown

from agent.answer import Answer, Citation, FindingView
from agent.compose import compose
from agent.summary import finished, verdict_of
from common.textsafe import clip_words, flanking_safe
from traindoc_cli.render import print_answer
from traindoc_cli.screen import document

ANSI = re.compile(r"\x1b\[[0-9;]*m")
PIP = "pip install torch==2.7.0 torchvision --index-url https://download.pytorch.org/whl/cu128 --force-reinstall"
SECTION = ("NCCL communication fails because no usable interface exists on this node.\n"
           "**1. Check the interfaces**\n**2. Set the interface**\nThen rerun.\n\n```bash\n" + PIP + "\n```\n")


def _strong_texts(markdown: str) -> tuple[list[str], list[str]]:
    """(text inside strong nodes, every text node) as CommonMark parses ``markdown``."""
    strong, texts = [], []
    for token in MarkdownIt("commonmark").parse(markdown):
        inside = False
        for child in token.children or []:
            if child.type == "strong_open":
                inside = True
            elif child.type == "strong_close":
                inside = False
            elif child.type == "text":
                texts.append(child.content)
                if inside:
                    strong.append(child.content)
    return strong, texts


def _rich(markdown: str, width: int = 80) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None)
    console.print(Markdown(markdown))
    return console.file.getvalue()


def _answer(question: str, confidence: float, findings: list[FindingView] | None = None) -> Answer:
    citation = Citation(1, "corpus/009_0123456789abcdef.txt", "Guide > NCCL interface", "c1", 0.6, text=SECTION)
    body = compose(question, [citation], findings or [], False, [], [], confidence=confidence)
    return _finished(Answer(question=question, answer=body, citations=[citation], findings=findings or [], no_match=False,
                            confidence=confidence))


def _finished(answer: Answer) -> Answer:
    """As agent.core finishes every offline answer: the verdict first (agent.summary.finished)."""
    answer.answer = finished(answer)
    answer.verdict = verdict_of(answer)
    return answer


@pytest.mark.parametrize("question", ["NCCL 报错 no socket interface found，怎么办？", "NCCL says no socket interface"],
                         ids=["zh", "en"])
def test_bold_renders_as_strong_in_commonmark_and_rich(question: str) -> None:
    answer = _answer(question, confidence=0.6)  # a weak match: the line a reader sees first says so, in bold
    strong, texts = _strong_texts(answer.answer)
    assert not any("**" in text for text in texts), [t for t in texts if "**" in t]
    weak = "匹配较弱" if question.startswith("NCCL 报错") else "Weak match"
    assert any(weak in text for text in strong), strong
    assert any(label in strong for label in ("原因", "Cause")), "the verdict's labels are strong too"
    assert "**" not in _rich(answer.answer)


def test_flanking_safe_moves_punctuation_out_of_the_emphasis_and_leaves_code() -> None:
    text = "> **匹配较弱（置信度 0.60）：**这一节 `**a：**b`"
    fixed = flanking_safe(text)
    assert fixed == "> **匹配较弱（置信度 0.60）**：这一节 `**a：**b`"
    assert "\u200b" not in fixed and "\u200c" not in fixed  # no invisible characters
    assert _strong_texts(text)[0] == [], "the original really fails CommonMark's flanking rule"
    assert _strong_texts(fixed)[0] == ["匹配较弱（置信度 0.60）"]
    assert flanking_safe("**Weak match (confidence 0.60):** this") == "**Weak match (confidence 0.60):** this"


def test_the_verdict_comes_first_with_the_first_fix_as_a_code_block() -> None:
    answer = _answer("NCCL says no socket interface", confidence=0.9)
    lines = answer.answer.splitlines()
    assert lines[0] == "### Answer"
    head = "\n".join(lines[:12])
    # a document's match: its number, said for what it is (the chance the section answers)
    assert "**Cause**: NCCL interface [1]" in head and "**Match**: 0.90 that the cited section answers this" in head
    assert f"```bash\n{PIP}\n```" in head, "the first fix, whole, as a code block"
    assert answer.verdict.fix_line == PIP
    assert answer.to_json()["verdict"]["fix"] == PIP
    assert finished(answer) == answer.answer, "a verdict is never added twice"


def test_a_measured_problem_is_the_verdict_with_its_own_fix() -> None:
    fix = ("Install a CUDA build of torch (`pip install torch --index-url https://download.pytorch.org/whl/cu128`); in a "
           "container, also pass the GPUs in (`docker run --gpus all ...`).")
    cpu = FindingView("torch_cuda_compat", "problem", "TORCH_CPU_ONLY", "torch 2.13.0+cpu is a CPU-only build", "e",
                      fix=fix, explains=True)
    answer = _answer("torch.cuda.is_available() returns False", 0.9, [cpu])
    verdict = answer.answer.split("\n### ", 1)[0]
    assert "**Cause**: torch 2.13.0+cpu is a CPU-only build" in verdict and "the probes measured it" in verdict
    assert "```bash\npip install torch --index-url https://download.pytorch.org/whl/cu128\n```" in verdict


def test_where_names_the_rank_the_host_and_the_line() -> None:
    from jobs.diagnosis import JobDiagnosis, RootCause

    root = RootCause("oom", 3, "rank 3 raised torch.OutOfMemoryError", host="gpu-n7", where="train.py:35",
                     confidence=0.9)
    citation = Citation(1, "corpus/runbooks/en/cuda_oom.md", "CUDA out of memory", "c1", 1.0, text=SECTION)
    body = compose("why did it crash", [citation], [], False, [], [])
    answer = _finished(Answer(question="why did it crash", answer="### What the job's logs say\n\nrank 3 ...\n\n" + body,
                              citations=[citation], findings=[], no_match=False, diagnosis=JobDiagnosis("log", root)))
    assert answer.answer.startswith("### Answer\n\n- **Cause**: CUDA out of memory [1]\n"
                                    "- **Where**: rank 3, host gpu-n7, `train.py:35`\n- **Evidence**: the logs name it\n")
    assert "0.9" not in answer.answer.split("### ", 2)[1], "what the logs prove has no number beside a document's match"


def test_numbered_items_inside_a_section_stay_a_list() -> None:
    answer = _answer("NCCL says no socket interface", confidence=0.9)
    kinds = [t.type for t in MarkdownIt("commonmark").parse(answer.answer)]
    assert "ordered_list_open" in kinds
    assert re.search(r"^ 1 Check the interfaces\s*$", _rich(answer.answer), re.M)
    assert re.search(r"^1\. Check the interfaces$", document(answer, "text"), re.M)


def test_each_finding_once_under_where_it_was_seen() -> None:
    log_hit = FindingView("log_grep", "problem", "CUDA_OOM", "GPU ran out of memory: 2x in console.log", "e")
    machine = FindingView("env_vars", "problem", "NCCL_IFNAME_MISSING", "NCCL_SOCKET_IFNAME names no interface", "e")
    ok = FindingView("port_check", "ok", "OK", "port 29500 free here", "")
    answer = _answer("NCCL says no socket interface", 0.9, [log_hit, log_hit, machine, ok])
    text = answer.answer
    assert text.count("CUDA_OOM") == 1, "a log's two identical matches are one line"
    machine_part = text.split("### What the probes found on this machine", 1)[1].split("###", 1)[0]
    assert "NCCL_IFNAME_MISSING" in machine_part and "CUDA_OOM" not in machine_part
    assert "CUDA_OOM" in text.split("### What the log shows", 1)[1].split("###", 1)[0]
    shown = document(answer, "text")
    assert "ok: OK" not in shown and "OK: port" not in shown
    assert "2 problem, 1 ok" in shown, "the probes in one line, each verdict said once"


def test_code_is_never_wrapped_and_the_summary_is_last() -> None:
    answer = _answer("NCCL says no socket interface", confidence=0.9)
    console = Console(file=io.StringIO(), width=40, force_terminal=True, color_system=None)
    print_answer(answer, console)
    out = ANSI.sub("", console.file.getvalue())
    assert any(line.strip() == PIP for line in out.splitlines()), "the command is one line, however narrow"
    cause, fix = [line for line in out.splitlines() if line.strip()][-2:]
    # Too narrow for both: the command on a line of its own under the cause, never wrapped mid-word.
    assert cause.startswith("Summary: ") and fix.strip() == f"fix: {PIP}"
    assert "corpus/009_" not in out, "sources by their titles, not hash-named files"
    assert "NCCL interface — Guide" in out


def test_text_and_markdown_formats_are_for_pasting() -> None:
    answer = _answer("NCCL 报错 no socket interface found，怎么办？", confidence=0.6)
    text = document(answer, "text")
    assert "**" not in text and "###" not in text and "\x1b" not in text
    assert f"\n    {PIP}\n" in text, "code indented, whole"
    assert text.rstrip().splitlines()[-2].startswith("结论：")  # the summary; its long command on the line below
    markdown = document(answer, "markdown")
    assert f"```bash\n{PIP}\n```" in markdown and markdown.rstrip().splitlines()[-2].startswith("结论：")


def test_no_color_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    answer = _answer("NCCL says no socket interface", confidence=0.9)
    outputs = {}
    for no_color in ("", "1"):
        monkeypatch.setenv("NO_COLOR", no_color)
        console = Console(file=io.StringIO(), width=80, force_terminal=True, color_system="standard")
        print_answer(answer, console)
        outputs[no_color] = console.file.getvalue()
    colour = re.compile(r"\x1b\[(?:[0-9;]*;)?(?:3[0-8]|9[0-7])[;m]")
    assert colour.search(outputs[""]), "colour on a colour terminal"
    assert not colour.search(outputs["1"]), "no colour under NO_COLOR"


@pytest.mark.parametrize(("text", "limit"), [
    ("rank 1 raised torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 149.01 GiB", 40),
    ("NCCL or gloo finds no usable network interface (NCCL_SOCKET_IFNAME, NCCL_IB_HCA)", 30),
])
def test_clipping_never_cuts_a_word(text: str, limit: int) -> None:
    clipped = clip_words(text, limit)
    assert len(clipped) <= limit and clipped.endswith("…")
    kept = clipped[:-1]
    assert text.startswith(kept) and not text[len(kept)].isalnum(), "cut where a word ends"


# -- the real CLI, on a pasted NCCL log and an OOM question, as an 80x24 terminal shows it ----------------------

NCCL_PASTE = "tests/jobs/data/pastes/nccl_socket_warns.log"


def _rows(line: str, width: int = 80) -> int:
    return max(1, -(-cell_len(line) // width))


@pytest.mark.parametrize(("question", "cause", "fix"), [
    (None, "NCCL or gloo finds no usable network interface", "export NCCL_SOCKET_IFNAME="),
    ("my training dies with CUDA out of memory, what should I do?", "CUDA out of memory", "--per_device_train_batch_size"),
], ids=["nccl-paste", "oom-question"])
def test_the_answer_is_on_one_80x24_screen(use_shared_index, cli, question, cause, fix) -> None:
    from clikit import ROOT

    question = question or (ROOT / NCCL_PASTE).read_text(encoding="utf-8")
    terminal = {"COLUMNS": "80", "LINES": "24", "FORCE_COLOR": "1", "NO_COLOR": "1"}  # rich acts as on a terminal
    result = cli("ask", "--no-probes", question, env=terminal)
    assert result.returncode == 0, result.stderr
    lines = ANSI.sub("", result.stdout).rstrip("\n").splitlines()
    rows, top = 0, []
    for line in lines:
        rows += _rows(line)
        if rows > 24:
            break
        top.append(line)
    screen = "\n".join(top)
    assert cause in screen, screen
    assert any(line.strip().startswith(fix) for line in top), screen
    last = lines[-1] if lines[-1].startswith("Summary: ") else "\n".join(lines[-2:])
    assert last.startswith("Summary: ") and fix in last, last
    # One line where the cause (clipped at a word) and the command fit; else the command (never cut) on a line of
    # its own below: the terminal never wraps the summary mid-word.
    assert all(_rows(line) == 1 or line.strip().startswith("fix: ") for line in last.splitlines()), last

    piped = cli("ask", "--no-probes", question, env={"COLUMNS": "80"})  # not a terminal: text to paste
    assert piped.returncode == 0, piped.stderr
    assert "\x1b" not in piped.stdout and "**" not in piped.stdout
    assert piped.stdout.rstrip().endswith(last)
    assert cli("ask", "--json", "--format", "text", "x").returncode == 2


@pytest.mark.parametrize("question", ["训练为什么挂了？", "why did my training crash?"], ids=["zh", "en"])
def test_a_real_job_answer_has_no_literal_asterisks_in_commonmark_or_rich(use_shared_index, cli, question) -> None:
    import json

    from clikit import ROOT

    log = ROOT / "tests" / "jobs" / "data" / "gpu-real" / "oom_crash" / "console.log"  # real, an H100
    result = cli("ask", "--json", "--no-probes", "--log", str(log), question)
    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)["answer"]
    strong, texts = _strong_texts(answer)
    assert not any("**" in text for text in texts), [t for t in texts if "**" in t]
    root = "根本原因" if question.startswith("训练") else "Root cause"
    assert any(text.startswith(root) for text in strong), strong  # the diagnosis's bold, in both languages
    assert any(text in ("原因", "Cause") for text in strong), strong
    assert "**" not in _rich(answer)
