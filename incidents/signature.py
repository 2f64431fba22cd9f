"""What identifies a failure, so that it is recognised when it comes back: its kind, its own error lines
normalised, the hosts and GPUs it names.

The same failure prints the same message with other numbers: another rank, PID, port, address, time, node
number, path. ``normalise()`` peels a line's log prefixes (``jobs.lines``: ``[rank3]:``, NCCL's
``host:pid:tid [dev]``, glog and ISO times, srun and pdsh labels) and replaces what varies from run to run by a
placeholder, one ordered table of rules (``VARYING``). A line that names no failure (a stack frame, "Last error:",
a launcher's summary) is not an identifying message (``GENERIC``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from common.secrets import mask

MESSAGES = 4  # identifying messages kept per failure
MESSAGE_CHARS = 300  # of each, as shown
KEY_CHARS = 160  # of each normalised key: a long message (an OOM's process list) varies in its tail
PREFIX_MIN = 40  # a key that is the start of another (the same message cut shorter) matches from this length

# What varies from one occurrence of a failure to the next, in order (a URL before the path inside it, an address
# before its numbers, a time before its digits): (pattern, placeholder). Applied to the lowered line.
VARYING: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\b(?:https?|file|s3|gs)://\S+"), "<url>"),
    (re.compile(r"\[?\b\d{1,3}(?:\.\d{1,3}){3}\]?(?::\d+)?"), "<ip>"),  # 10.2.0.7, [127.0.0.1]:1948
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uuid>"),
    (re.compile(r"\b[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}(?:\.[0-7])?\b"), "<pci>"),  # a GPU's bus id
    (re.compile(r"\b0x[0-9a-f]+\b"), "<hex>"),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b"), "<hex>"),  # ids, hashes
    (re.compile(r"\d{4}-\d\d-\d\d(?:[ t_]\d\d:\d\d(?::\d\d)?(?:[.,]\d+)?)?"), "<time>"),
    (re.compile(r"\b\d\d:\d\d:\d\d(?:[.,]\d+)?\b"), "<time>"),
    (re.compile(r"(?:[\w.~-]*/)+[\w.-]+"), "<path>"),  # /opt/conda/.../c10d.py, ../third_party/gloo/device.cc
    (re.compile(r"\d+(?:\.\d+)?"), "<n>"),  # ranks, PIDs, ports, sizes, node and GPU numbers
    (re.compile(r"\s+"), " "),
)
# Lines that are no failure's own: stack frames, launcher summaries, the words around an error.
GENERIC = re.compile(
    r"^(?:traceback \(most recent call last\):?|last error:?|file \"|\S+ \(\S+:<n>\)$|.*childfailederror|"
    r"failed \(exitcode|error_file:|root cause \(first observed failure\)|.*this usually reflects invalid usage|"
    r"sending process <n> closing signal|warning:? |info )"
)
LETTER_WORDS = re.compile(r"[a-z]{2,}")
# Where the program's words start in a line the user wrote around them ("my job on gpu-17 died: RuntimeError: ...").
EXCEPTION = re.compile(r"(?<![\w.])[A-Za-z_][\w.]{0,80}(?:Error|Exception)\s{0,4}:")

# Where a job ran: cluster node names (gpu-17, node7, worker-3, dgx-a100-04) and the GPUs a line names.
HOST = re.compile(r"(?<![\w.-])(?:node|gpu|host|worker|compute|dgx|hgx|trainer|cn)(?:-[a-z0-9]+)*[-_]?\d+(?:-[a-z0-9]+)*(?![\w-])",
                  re.IGNORECASE)
GPU = re.compile(r"\bGPU[ #]?(?P<n>\d{1,2})\b|\bcuda:(?P<c>\d{1,2})\b|\b(?P<pci>[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])\b|"
                 r"\bPCI:(?P<bus>[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2})\b", re.IGNORECASE)


@dataclass(frozen=True)
class Failure:
    """A failure as incidents know it. ``keys`` are ``messages`` normalised, in the same order."""

    kind: str  # the registry kind whose runbook leads (runbooks.registry), "" when none does
    messages: tuple[str, ...]  # the failure's own error lines, masked
    keys: tuple[str, ...]
    hosts: tuple[str, ...] = ()
    gpus: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "messages": list(self.messages), "keys": list(self.keys), "hosts": list(self.hosts),
                "gpus": list(self.gpus)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Failure:
        messages = tuple(mask(str(m))[:MESSAGE_CHARS] for m in data.get("messages") or ())
        keys = tuple(str(k) for k in data.get("keys") or ()) or tuple(k for m in messages if (k := normalise(m)))
        return cls(str(data.get("kind") or ""), messages, keys, tuple(str(h) for h in data.get("hosts") or ()),
                   tuple(str(g) for g in data.get("gpus") or ()))


def normalise(line: str) -> str:
    """The line as every occurrence of the same failure prints it ("" when it names no failure)."""
    from jobs.lines import parse_line

    text = parse_line(line, "", 0).text.strip()
    if (raised := EXCEPTION.search(text)) is not None:
        text = text[raised.start():]
    text = text.lower()
    for pattern, placeholder in VARYING:
        text = pattern.sub(placeholder, text)
    text = text.strip(" .:;,-")
    if GENERIC.match(text) or len(LETTER_WORDS.findall(text)) < 3:
        return ""
    return text[:KEY_CHARS].rstrip()


def same_message(a: str, b: str) -> bool:
    """Two keys are one message: equal, or one the start of the other (the same line cut shorter)."""
    if a == b:
        return True
    short, long = sorted((a, b), key=len)
    return len(short) >= PREFIX_MIN and long.startswith(short)


def failure_of(answer: Any) -> Failure | None:
    """The failure an answer (``agent.answer.Answer``) is about: the root cause's lines when the job's logs name
    one, else the error lines of what was asked; None when nothing identifies it (a question with no error)."""
    job = getattr(answer, "diagnosis", None)
    root = getattr(job, "root_cause", None)
    lines = list(root.evidence) if root is not None and root.category != "unknown" else []
    lead = getattr(answer, "lead", None)
    if not lines:
        lines = list(getattr(answer, "error_lines", None) or [])
        if lead is not None and lead.because:
            lines.insert(0, lead.because)
    messages, keys = _identifying(lines)
    if not keys:
        return None
    named = [answer.question, *messages]
    verdict = getattr(answer, "verdict", None)
    if verdict is not None:
        named.append(verdict.where)
    hosts = _unique(([root.host] if root is not None and root.host else []) + [m.group(0) for t in named for m in HOST.finditer(t)])
    return Failure(lead.kind if lead is not None else "", tuple(messages), tuple(keys), hosts,
                   _unique(_gpu(m) for t in named for m in GPU.finditer(t)))


def _identifying(lines: Iterable[str]) -> tuple[list[str], list[str]]:
    messages: list[str] = []
    keys: list[str] = []
    for line in lines:
        shown = mask(" ".join(line.split()))[:MESSAGE_CHARS]
        key = normalise(shown)
        if key and not any(same_message(key, k) for k in keys):
            messages.append(shown)
            keys.append(key)
        if len(keys) == MESSAGES:
            break
    return messages, keys


def _gpu(found: re.Match[str]) -> str:
    return (found["n"] or found["c"] or found["pci"] or found["bus"] or "").lower()


def _unique(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(i for i in items if i))[:6]
