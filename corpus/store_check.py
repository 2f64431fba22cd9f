"""Is the local store safe to open in this process? hnswlib, inside chromadb's Rust core, calls ``abort()`` on a
truncated or garbled vector file: no Python handler sees it, the process dies (exit 134) with a C++ message.
So when the store's files changed since the last run that wrote them, `traindoc index` opens the store and
searches it in a child process first; a child that dies, fails or hangs (some damage deadlocks chromadb) says
the store is damaged, and it is rebuilt; one that cannot open it for a full disk says so, and nothing is rebuilt.

Run as ``python -m corpus.store_check``: the child, reading the settings from the environment.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys

from common.settings import Settings

log = logging.getLogger(__name__)
CHECK_TIMEOUT_S = 30.0  # a healthy 30,000-chunk store checks in about 2 s; a damaged one can hang for ever
PROBES = 8  # searches the child runs
DISK_FULL_EXIT = 3  # the child could not open the store for a full disk: not damage


def _signal_name(number: int) -> str:
    """SIGSEGV for 11; a real-time signal (no name in ``signal.Signals``) by its number."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def store_damage(settings: Settings) -> str:
    """Why the local store cannot be opened and searched, found in a child process; "" when it can. A full disk
    is no damage: ``DiskFullError``."""
    env = dict(os.environ, TRAINDOC_DATA_DIR=str(settings.data_dir), TRAINDOC_EMBED_MODEL=settings.embed_model)
    try:
        debug = ["--debug"] if log.isEnabledFor(logging.DEBUG) else []  # the child's own account, panics included
        child = subprocess.run([sys.executable, "-m", "corpus.store_check", *debug], env=env, capture_output=True,
                               timeout=CHECK_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return f"opening it took more than {CHECK_TIMEOUT_S:.0f} s"
    except OSError:  # no interpreter to start a child with: the store is opened in this process, as before
        return ""
    if child.returncode == 0:
        return ""
    if child.returncode == DISK_FULL_EXIT:  # not damaged: nothing to rebuild, the disk to free
        from corpus.store import disk_full

        raise disk_full(settings.chroma_dir)
    log.debug("the store check in a child process ended with %s:\n%s", child.returncode,
              child.stderr.decode("utf-8", errors="replace")[-64 * 1024 :])
    if child.returncode < 0:
        return f"opening it killed the process ({_signal_name(-child.returncode)})"
    said = child.stderr.decode("utf-8", errors="replace").strip().splitlines()
    return said[-1][:300] if said else f"opening it failed (exit {child.returncode})"


def _check() -> int:
    import numpy as np

    from common.errors import DiskFullError, TraindocError
    from corpus.embedding import LazyEmbedder
    from corpus.store import VectorStore

    if "--debug" in sys.argv[1:]:
        logging.basicConfig(level=logging.DEBUG, format="%(name)s: %(message)s")
    settings = Settings.from_env()
    try:
        store = VectorStore(settings, LazyEmbedder(settings.embed_model), create=False)
        dims = store.dimensions()
        probes = np.random.default_rng(0).normal(size=(PROBES if dims else 0, max(dims, 1))).astype(np.float32)
        for vector in probes:  # searches that walk the graph: a load alone misses a file cut short inside
            store.nearest(vector / np.linalg.norm(vector), 100)
    except DiskFullError as exc:
        print(exc.message, file=sys.stderr)
        return DISK_FULL_EXIT
    except TraindocError as exc:
        print(exc.message, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_check())
