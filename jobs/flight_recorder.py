"""Flight Recorder dumps read by PyTorch's own analyzer (``torch.distributed.flight_recorder``), bounded in time.

The analyzer (``read_dir`` + ``build_db``, what ``python -m torch.distributed.flight_recorder.fr_trace`` runs)
matches every rank's collectives and names the first one where ranks diverge: ranks missing from it, or
ranks that called something else. It runs in a child interpreter (``python -m jobs.flight_recorder``) so that
a slow or crashing analysis is killed at its deadline and traindoc itself never imports torch for it. Its
result becomes a short finding: which collective (sequence number, process group), which ranks are missing or
diverge, and each rank's last recorded collective. Dumps are pickles: analyse only dumps you trust (your own job's).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from common.language import say
from jobs.diagnosis import listed, ranks_text

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class RankOp:
    rank: int
    name: str  # "nccl:all_reduce"
    seq: int
    state: str  # scheduled / started / completed, as recorded
    group: str
    where: str | None = None  # the user frame that called it, when the dump has stacks ("train.py:18")


@dataclass(frozen=True)
class FrFinding:
    summary: str
    ranks: list[int]  # ranks with a dump
    expected_ranks: list[int] = field(default_factory=list)
    collective: str | None = None  # "nccl:all_reduce #4 (default_pg)"
    seq: int | None = None
    group: str | None = None
    state: str | None = None
    missing_ranks: list[int] = field(default_factory=list)
    mismatched: dict[int, str] = field(default_factory=dict)  # rank -> what it called instead, and the analyzer's verdict
    last_ops: list[RankOp] = field(default_factory=list)  # each rank's last recorded collective
    where: str | None = None
    analyzer_log: list[str] = field(default_factory=list)
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["mismatched"] = {str(k): v for k, v in self.mismatched.items()}
        return data


def analyse_dir(fr_dir: Path, timeout_s: float = 60.0) -> FrFinding:
    """The analyzer on a folder of dumps (``TORCH_FR_DUMP_TEMP_FILE=DIR/nccl_trace_rank_`` wrote one per rank)."""
    if not fr_dir.is_dir():
        return FrFinding("", [], error=f"{fr_dir} is not a folder")
    return _run([str(fr_dir)], None, timeout_s)


def analyse_dumps(dumps: Mapping[int, Mapping[str, Any]], timeout_s: float = 60.0) -> FrFinding:
    """The analyzer on per-rank dumps already loaded (the debug server's ``fr_trace_json``), by rank."""
    payload = json.dumps({str(rank): dict(dump) for rank, dump in dumps.items()})
    return _run(["-"], payload, timeout_s)


def _run(args: list[str], stdin: str | None, timeout_s: float) -> FrFinding:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    command = [sys.executable, "-m", "jobs.flight_recorder", *args]
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, start_new_session=True, text=True)
    try:
        out, err = proc.communicate(stdin or "", timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # our own analyzer child, never the job
        proc.communicate()
        return FrFinding("", [], error=f"the Flight Recorder analyzer did not finish within {timeout_s:g} s")
    try:
        data = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
    except ValueError:
        data = {}
    log = [line for line in err.splitlines() if line.strip()]
    if not data or data.get("error"):
        reason = data.get("error") or (log[-1] if log else f"exit code {proc.returncode}")
        return FrFinding("", [], analyzer_log=log[-40:], error=f"the Flight Recorder analyzer failed: {reason}")
    return describe(data, log)


def describe(data: Mapping[str, Any], log: list[str] | None = None) -> FrFinding:
    """The analyzer's output (see ``_analyse``) as a finding in plain words."""
    ranks = sorted(int(r) for r in data.get("ranks", []))
    last = sorted((RankOp(int(o["rank"]), o["name"], int(o["seq"]), o["state"], o["group"], o.get("where"))
                   for o in data.get("last", [])), key=lambda o: o.rank)
    bad = data.get("first_bad")
    common = dict(ranks=ranks, last_ops=last, analyzer_log=(log or [])[-40:])
    if bad:
        name, seq, group = bad["name"], int(bad["seq"]), bad["group"]
        label = f"{name} #{seq} ({group})"
        expected = sorted(bad.get("expected_ranks") or ranks)
        missing = sorted(bad.get("missing_ranks") or [])
        mismatched = {int(r): v for r, v in (bad.get("mismatched") or {}).items()}
        joined = [r for r in expected if r not in missing and r not in mismatched]
        if missing:
            lasts = say("jobs.clause_sep").join(say("hang.fr.last_was", rank=o.rank, name=o.name, seq=o.seq)
                                                for o in last if o.rank in missing)
            summary = say("hang.fr.never_joined", joined=_ranks(joined), label=label, missing=_ranks(missing),
                          lasts=say("hang.fr.lasts", lasts=lasts) if lasts else "")
        else:
            # a bad collective no rank called differently (the analyzer's pass_check) reads "...called NAME; "
            others = "".join(say("hang.fr.called", rank=r, call=v) for r, v in sorted(mismatched.items()))
            summary = say("hang.fr.diverge", label=label, joined=_ranks(joined), name=name, others=others or "; ")
        return FrFinding(summary, expected_ranks=expected, collective=label, seq=seq, group=group,
                         state=bad.get("state"), missing_ranks=missing, mismatched=mismatched,
                         where=bad.get("where"), **common)  # type: ignore[arg-type]
    pending = [o for o in last if o.state != "completed"]
    if pending:
        first = min(pending, key=lambda o: o.seq)
        label = f"{first.name} #{first.seq} ({first.group})"
        states = {o.state for o in pending}
        if states == {"scheduled"} and len(pending) == len(last):
            what = say("hang.fr.never_started_one" if len(last) == 1 else "hang.fr.never_started")
        elif "started" in states:
            what = say("hang.fr.stalled")
        else:
            what = say("hang.fr.incomplete")
        lead = (say("hang.fr.dump_ends", rank=last[0].rank, label=label) if len(last) == 1
                else say("hang.fr.dumps_agree", label=label))
        where = say("hang.fr.called_at", where=first.where) if first.where else ""
        return FrFinding(say("hang.fr.pending", lead=lead, what=what, where=where),
                         collective=label, seq=first.seq, group=first.group, state=first.state, where=first.where,
                         expected_ranks=ranks, **common)  # type: ignore[arg-type]
    return FrFinding(say("hang.fr.all_completed"),
                     expected_ranks=ranks, **common)  # type: ignore[arg-type]


def _ranks(ranks: list[int]) -> str:
    """"rank 1", "ranks 0, 1 and 2": every rank listed (the analyzer's ranks are few)."""
    if len(ranks) < 2:
        return ranks_text(ranks)
    return say("jobs.ranks", ranks=listed([str(r) for r in ranks]))


# -- the child: runs torch's analyzer ------------------------------------------------------------------------------

def _analyse(source: str) -> dict[str, Any]:
    import copy

    from torch.distributed.flight_recorder.components.builder import build_db
    from torch.distributed.flight_recorder.components.config_manager import JobConfig
    from torch.distributed.flight_recorder.components.loader import read_dir

    if source == "-":
        raw = json.loads(sys.stdin.read())
        details = {f"rank{r}": {"rank": int(r), "host_name": f"rank{r}", "entries": [], **d} for r, d in raw.items()}
        version = str(next(iter(details.values()))["version"]) if details else ""
    else:
        details, version = read_dir(JobConfig().parse_args([source, "--allow-incomplete-ranks"]))
    if not details:
        return {"error": "no dumps"}
    _repair_gloo_pg_config(details)
    last = [_last_op(d) for d in details.values() if d.get("entries")]
    db = build_db(copy.deepcopy(details), JobConfig().parse_args(["--allow-incomplete-ranks"]), version)
    bad = next((c for c in db.collectives if not c.pass_check or c.missing_ranks or c.mismatch_collectives), None)
    result: dict[str, Any] = {"ranks": sorted(int(d["rank"]) for d in details.values()), "version": version,
                              "collectives": len(db.collectives), "last": [op for op in last if op]}
    if bad is not None:
        result["first_bad"] = {
            "name": bad.collective_name, "seq": bad.collective_seq_id, "group": bad.pg_desc, "state": bad.collective_state,
            "expected_ranks": sorted(bad.expected_ranks), "missing_ranks": sorted(bad.missing_ranks or ()),
            "mismatched": {str(r): f"{c.collective_name} #{c.collective_seq_id} ({c.type_of_mismatch})"
                           for r, c in (bad.mismatch_collectives or {}).items()},
            "where": _user_frame(bad.collective_frames),
        }
    return result


def _repair_gloo_pg_config(details: dict[str, dict[str, Any]]) -> None:
    """gloo's recorder writes its process group as name '' while its entries say '0' (torch 2.13), which the
    analyzer cannot match: when a dump has one group and its entries use one name, give the config that name."""
    for dump in details.values():
        config = dump.get("pg_config") or {}
        used = {tuple(e["process_group"]) for e in dump.get("entries", []) if e.get("process_group")}
        if len(config) == 1 and "" in config and len(used) == 1:
            name, desc = next(iter(used))
            dump["pg_config"] = {name: {**config[""], "name": name, "desc": desc}}


def _last_op(dump: Mapping[str, Any]) -> dict[str, Any] | None:
    entries = [e for e in dump.get("entries", []) if not e.get("is_p2p")]
    if not entries:
        return None
    entry = max(entries, key=lambda e: (e.get("collective_seq_id") or 0, e.get("record_id") or 0))
    group = entry.get("process_group") or ["?", "?"]
    return {"rank": int(dump["rank"]), "name": entry.get("profiling_name", "?"), "seq": int(entry.get("collective_seq_id") or 0),
            "state": str(entry.get("state", "?")), "group": group[1] if group[1] not in ("", "undefined") else group[0],
            "where": _user_frame(entry.get("frames") or [])}


def _user_frame(frames: list[dict[str, Any]]) -> str | None:
    for frame in frames or ():
        path = str(frame.get("filename", ""))
        if path and "site-packages" not in path and "dist-packages" not in path and "/torch/" not in path:
            return f"{os.path.basename(path)}:{frame.get('line')}"
    return None


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m jobs.flight_recorder (DIR | -)", file=sys.stderr)
        return 2
    try:
        result = _analyse(argv[0])
    except (Exception, SystemExit) as exc:  # the analyzer asserts on bad input: report it as data
        result = {"error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(result, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
