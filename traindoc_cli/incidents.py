"""`traindoc incidents list|export|delete|import` and `traindoc feedback fixed`: the incidents this cluster
resolved (``incidents/``), kept beside the feedback store.

`traindoc feedback fixed` marks an answer as what fixed the job: a FILE `ask --json` wrote, or by default the last
answer `ask` printed here (``ask`` keeps what marking needs of it, masked, in ``last-answer.json``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from common.errors import InputError, UsageError


def add_parsers(commands: Any, feedback_commands: Any) -> None:
    """The `incidents` command and `feedback fixed`, on ``traindoc``'s parsers."""
    fixed = feedback_commands.add_parser("fixed", help="mark an answer as what fixed the job: a resolved incident, recognised "
                                         "when the failure comes back")
    fixed.add_argument("answer", nargs="?", type=Path, metavar="FILE",
                       help="an answer `ask --json` wrote (default: the last answer `ask` printed here)")
    fixed.add_argument("--note", default="", help="what you changed (kept with the incident, secrets masked)")
    incidents = commands.add_parser("incidents", help="failures this cluster resolved (from `feedback fixed`, the web's 👍, "
                                    "Slack's :+1:): list, export, delete, import")
    actions = incidents.add_subparsers(dest="incidents_command", metavar="ACTION", parser_class=type(incidents))
    listing = actions.add_parser("list", help="every incident: id, date, kind, where, what fixed it")
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    export = actions.add_parser("export", help="write the incidents to a JSON-lines file (place it in a TRAINDOC_CORPUS "
                                "folder as incidents.jsonl to share them with the team)")
    export.add_argument("file", type=Path, metavar="FILE")
    delete = actions.add_parser("delete", help="delete one incident")
    delete.add_argument("id", metavar="ID")
    imported = actions.add_parser("import", help="add the incidents of a JSON-lines file (those already here are skipped)")
    imported.add_argument("file", type=Path, metavar="FILE")


def _store(settings: Any) -> Any:
    from incidents.store import IncidentStore, local_path

    return IncidentStore(local_path(settings.feedback_path))


def last_answer_path(settings: Any) -> Path:
    from incidents.record import LAST_ANSWER
    from incidents.store import local_path

    return local_path(settings.feedback_path).with_name(LAST_ANSWER)


def run_fixed(args: argparse.Namespace, settings: Any) -> int:
    from incidents.record import read_answer, record_fixed

    path = args.answer or last_answer_path(settings)
    if args.answer is None and not path.is_file():
        raise UsageError("no answer to mark: `ask` has printed none with an error message here",
                         hint="ask about the failure first, or give a file `ask --json` wrote")
    incident = record_fixed(_store(settings), read_answer(path), note=args.note, channel="cli")
    if incident is None:
        raise InputError(f"the answer in {path} names no error message to recognise the failure by",
                         hint="mark an answer to an error or a log")
    print(f"traindoc: recorded incident {incident.id} ({incident.kind or 'no kind'}, {incident.date}): when this "
          "failure comes back, the answer says so first", file=sys.stderr)
    return 0


def run_incidents(args: argparse.Namespace, settings: Any) -> int:
    from common.textsafe import printable
    from incidents.store import read_incidents, write_incidents

    store = _store(settings)
    command = args.incidents_command
    if command == "list":
        for incident in store.all():
            print(json.dumps(incident.to_json(), ensure_ascii=False) if args.json else printable(_line(incident)))
        return 0
    if command == "export":
        written = write_incidents(args.file, store.all(), mode=0o644)  # masked; made to be shared
        print(f"traindoc: wrote {written} incidents to {args.file}", file=sys.stderr)
        return 0
    if command == "delete":
        if not store.delete(args.id):
            raise InputError(f"no incident {args.id!r}", hint="`traindoc incidents list` shows their ids")
        print(f"traindoc: deleted incident {args.id}", file=sys.stderr)
        return 0
    if command == "import":
        if not args.file.is_file():
            raise InputError(f"cannot read {args.file}: no such file")
        added = store.merge(read_incidents(args.file))
        print(f"traindoc: imported {added} incidents from {args.file}", file=sys.stderr)
        return 0
    raise UsageError("usage: traindoc incidents list|export FILE|delete ID|import FILE")


def _line(incident: Any) -> str:
    """One incident as a row: id, date, kind, where, what fixed it, its first message."""
    where = ", ".join([*incident.failure.hosts, *(f"GPU {g}" for g in incident.failure.gpus)]) or "-"
    fixed = incident.note or incident.fix or "-"
    message = incident.failure.messages[0] if incident.failure.messages else ""
    return f"{incident.id}  {incident.date}  {incident.kind or '-'}  {where}\n    fixed by: {fixed}\n    message: {message}"
