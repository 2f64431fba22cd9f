"""Long pastes and uploads answered in a worker process of the web server's own (issue 40 point 4).

Reading a long paste or an uploaded log and triaging it is the heaviest work the chat does; on the server's
interpreter it held the GIL every user's short question needs. ``Worker`` hands such a turn to one long-lived
process, started on the first such turn (a fresh interpreter, as ``spawn`` makes: none of the server's threads or
locks) with its own Troubleshooter built from the same Settings. Both sides run one function, ``answer_turn``: the
upload read within its limit, the same ``intake``, the same ``ask()``; its replies (the ``Asked`` line the chat shows
as the user's message, the typed events of agent.events, the ``Answer`` in the last) come back over a private socket
pair, so the chat renders them exactly as it renders an answer made on its own threads. Bounded:

- a time limit per turn (``turn_limit_s``): past it the worker is killed and the user gets one line in their
  language (``web.long_turn_too_long``);
- a worker that dies (killed, out of memory) costs the turn it was answering one line (``web.worker_died``); the
  next long turn starts a fresh one;
- the worker ends with the server: it exits when the server's end of its lifeline closes (the server killed
  included), ignores the terminal's Ctrl-C (the server handles it and stops it), and is stopped when its
  ``WebChat`` goes away.

What crosses the pipe is what ``ask()`` is given in the server today (nothing is masked before it there either:
masking happens where text is shown or stored); the worker's log lines are masked as the server's are
(traindoc_cli.quiet), and its errors come back as the one line the chat shows, never logged with the text.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from common.errors import TraindocError
from common.language import Lang, say

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

    from agent.core import Troubleshooter
    from common.settings import Settings

START_S = 120.0  # for a fresh worker to import traindoc and load the index
TURN_S = 120.0  # a long turn answered offline; a model adds its own limits (turn_limit_s)
STOP_S = 5.0
NICE = 10  # the worker's priority below the server's: its long turns wait for the CPU, never the short questions
log = logging.getLogger("traindoc.web")


@dataclass(frozen=True)
class Turn:
    """What the chat received for one turn, as the worker can be handed it (agent.intake.Received, less a reading
    the server would have had to make itself)."""

    text: str
    upload: str | None = None  # a log file to read (within ``max_upload_mb``) as the job this turn asks about
    held: bytes | None = None  # its bytes, where a full disk kept the upload in memory (traindoc_web.held)
    bundle: Path | None = None
    history: Sequence[Mapping[str, Any]] = ()
    probes: bool = False
    max_upload_mb: float = 50.0


@dataclass(frozen=True)
class Asked:
    """The question as intake read it: the chat shows it as the user's message and keeps it in the conversation."""

    text: str
    log_head: str = ""
    log_errors: tuple[str, ...] = ()
    log_paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class Unread:
    message: str  # the upload could not be read (too big, not text): the server names it by its file name


@dataclass(frozen=True)
class Refused:
    message: str  # nothing to answer (agent.intake.NoContent)


@dataclass(frozen=True)
class Failed:
    message: str  # the turn failed after it was read: one line, as the chat shows it


@dataclass(frozen=True)
class _Ready:
    pass


@dataclass(frozen=True)
class _Done:
    pass


Reply = Any  # Asked | Unread | Refused | Failed | agent.events.Event
Send = Callable[[Reply], None]


def answer_turn(troubleshooter: Troubleshooter, turn: Turn, send: Send) -> None:
    """One turn as the chat answers it, wherever it runs: the upload read within its limit, the same intake, the same
    ``ask()``; every reply goes to ``send`` (the server's queue, or the worker's pipe). Ends with an ``Unread``, a
    ``Refused``, a ``Failed`` or the ``FinalAnswer`` event."""
    from agent.intake import NoContent, Received, intake
    from traindoc_web.upload import read_upload

    try:
        reading, paths = read_upload(turn.upload, turn.max_upload_mb, turn.text, turn.held)
    except TraindocError as exc:
        send(Unread(str(exc)))
        return
    try:
        question = intake(Received(text=turn.text, reading=reading, logs=paths, bundle=turn.bundle,
                                   history=list(turn.history), probes=turn.probes))
    except NoContent as exc:  # "???", an emoji: nothing to answer, and no runbook is guessed for it
        send(Refused(exc.message))
        return
    except BaseException as exc:  # shown in the chat, never a traceback
        send(Failed(_line(exc)))
        return
    send(Asked(question.text, reading.head, tuple(reading.errors), tuple(str(p) for p in paths)))
    try:
        troubleshooter.ask(question, on_event=send)
    except BaseException as exc:
        send(Failed(_line(exc)))


def _line(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, TraindocError) else f"internal error: {type(exc).__name__}"


def turn_limit_s(settings: Settings) -> float:
    """A long turn's time limit: offline, TURN_S; with a model, its own limits on top (each step may take its
    timeout, and the last step answers without tools)."""
    if settings.backend == "offline":
        return TURN_S
    return TURN_S + settings.llm_timeout_s * (settings.llm_max_steps + 1)


class Worker:
    """The server's side of the worker process: ``answer()`` hands it one turn at a time (callers hold
    traindoc_web.chat's ``LONG_TURNS``; the lock here keeps the pipe whole whatever they do)."""

    def __init__(self, settings: Settings, limit_s: float | None = None) -> None:
        self.settings = settings
        self._limit_s = limit_s
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self._lifeline: int | None = None  # the server's end: closed (or the server gone), the worker exits

    @property
    def limit_s(self) -> float:
        """A turn's time limit: the one given, else the settings' (``turn_limit_s``)."""
        return self._limit_s if self._limit_s is not None else turn_limit_s(self.settings)

    @property
    def pid(self) -> int | None:
        """The worker's process id while one runs."""
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    def answer(self, turn: Turn, send: Send, lang: Lang = "en") -> None:
        """Answer ``turn`` in the worker, each reply to ``send`` as it comes. A turn past the time limit, or whose
        worker died, raises TraindocError with one line in ``lang`` (the worker is then gone: the next turn starts a
        fresh one)."""
        with self._lock:
            conn, _ = self._started(lang)
            try:
                conn.send(turn)
            except OSError as exc:  # it died between turns
                self._kill()
                raise TraindocError(say("web.worker_died", lang)) from exc
            limit_s = self.limit_s
            deadline = time.monotonic() + limit_s
            finished = False  # the turn's last reply came: a death after it costs nothing
            while True:
                try:
                    if not conn.poll(max(0.0, deadline - time.monotonic())):
                        self._kill()
                        raise TraindocError(say("web.long_turn_too_long", lang, s=f"{limit_s:g}"))
                    reply = conn.recv()
                except (EOFError, OSError):  # its end closed: the process ended (only death closes it)
                    reply = None
                if reply is None:
                    self._kill()
                    if finished:
                        return
                    raise TraindocError(say("web.worker_died", lang))
                if isinstance(reply, _Done):
                    return
                finished = finished or _last(reply)
                send(reply)

    def _started(self, lang: Lang) -> tuple[Connection, subprocess.Popen[bytes]]:
        """The running worker, or a fresh one once it said it is ready (START_S at most): ``python -m
        traindoc_web.worker`` (a fresh interpreter, as multiprocessing's spawn makes, without re-running the
        server's own main script), over a socket pair of its own and a lifeline pipe whose end the server keeps."""
        from multiprocessing.connection import Connection

        if self._process is not None and self._conn is not None and self._process.poll() is None:
            return self._conn, self._process
        self._kill()
        ours, theirs = socket.socketpair()
        lifeline, self._lifeline = os.pipe()  # not inheritable: only this worker gets its end
        try:
            process = subprocess.Popen([sys.executable, "-m", "traindoc_web.worker", str(theirs.fileno()), str(lifeline)],
                                       pass_fds=(theirs.fileno(), lifeline), stdin=subprocess.DEVNULL)
        except OSError as exc:
            ours.close()
            self._kill()
            raise TraindocError(say("web.worker_died", lang)) from exc
        finally:
            theirs.close()
            os.close(lifeline)
        conn = Connection(ours.detach())
        self._process, self._conn = process, conn
        debug = logging.getLogger().getEffectiveLevel() <= logging.DEBUG
        try:
            conn.send((self.settings, debug))
            if conn.poll(START_S) and isinstance(conn.recv(), _Ready):
                return conn, process
        except (EOFError, OSError):
            pass
        self._kill()
        raise TraindocError(say("web.worker_died", lang))

    def _kill(self, *, gently: bool = False) -> None:
        """The worker gone: at once (a turn past its limit, a broken pipe), or ``gently`` when it is idle (its end of
        the pipe closes and it returns), killed all the same when it lingers."""
        process, conn, lifeline = self._process, self._conn, self._lifeline
        self._process, self._conn, self._lifeline = None, None, None
        if conn is not None:
            conn.close()
        if lifeline is not None:
            os.close(lifeline)
        if process is None:
            return
        if gently:
            try:
                process.wait(STOP_S)
            except subprocess.TimeoutExpired:
                pass
        if process.poll() is None:
            process.kill()
        try:
            process.wait(STOP_S)
        except subprocess.TimeoutExpired:  # unkillable (in the kernel): left to the system, never waited on
            log.warning("traindoc web: the worker process %d did not end", process.pid)

    def stop(self) -> None:
        """End the worker (the server stops, or its chat goes away)."""
        if self._lock.acquire(timeout=STOP_S):  # not in the middle of a turn's reply
            try:
                self._kill(gently=True)
            finally:
                self._lock.release()
        else:
            process = self._process
            if process is not None and process.poll() is None:
                process.kill()


def stopped_with(owner: object, worker: Worker) -> Worker:
    """``worker``, stopped when ``owner`` (its WebChat) is collected."""
    weakref.finalize(owner, worker.stop)
    return worker


def _last(reply: Reply) -> bool:
    from agent.events import FinalAnswer

    return isinstance(reply, Unread | Refused | Failed | FinalAnswer)


# -- the worker process --------------------------------------------------------------------------------------

def serve(channel: int, lifeline: int) -> int:
    """The worker's main (``python -m traindoc_web.worker CHANNEL LIFELINE``): the settings first, then its own
    Troubleshooter over them, one turn at a time until the server's end of the channel closes."""
    from multiprocessing.connection import Connection

    from common.memory import limit_malloc_arenas, return_freed_memory
    from common.private import exit_handlers_on_sigterm
    from traindoc_cli.quiet import setup_logging

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the server's to handle: it stops us
    exit_handlers_on_sigterm()  # a service manager's SIGTERM to the whole group: its private copy goes too
    os.nice(NICE)  # on a busy machine the server's short questions get the CPU first
    # The server gone (SIGKILL included), mid-turn too: its end of the lifeline closes and this process ends.
    threading.Thread(target=_exit_with, args=(lifeline,), name="traindoc-web-lifeline", daemon=True).start()
    conn = Connection(channel)
    try:
        settings, debug = conn.recv()
        setup_logging(debug)  # the same masked, traindoc-only lines on stderr as the server's
        limit_malloc_arenas(2)
        from agent.core import Troubleshooter

        troubleshooter = Troubleshooter(settings, index_in_background=True)  # a changed corpus: on a thread, as the server
        try:
            troubleshooter.retriever()  # the index loaded before the first turn
        except Exception as exc:  # the same error reaches each turn from its ask(), said there in one line
            log.debug("the worker's index: %s", exc)
        conn.send(_Ready())
        while True:
            turn = conn.recv()
            answer_turn(troubleshooter, turn, conn.send)
            conn.send(_Done())
            return_freed_memory()  # a long paste's or an upload's heap back to the system between turns
    except (EOFError, OSError):  # the server closed its end (it stopped us, or it is gone)
        return 0


def _exit_with(lifeline: int) -> None:
    from common.private import remove_private_temps

    while os.read(lifeline, 1):  # nothing is ever written: this returns b"" once the server's end is closed
        pass
    remove_private_temps()  # a read-only index's private copy (corpus.store): os._exit runs no exit handler
    os._exit(0)


if __name__ == "__main__":  # the module's own copy: the worker runs the package's (the classes the server knows)
    from traindoc_web.worker import serve as _main

    sys.exit(_main(int(sys.argv[1]), int(sys.argv[2])))
