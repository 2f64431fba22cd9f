"""The process's heap on glibc: fewer malloc arenas for a big build, and freed memory handed back.

chromadb's Rust core and the embedding model run on worker threads; glibc gives each thread its own arena and
keeps what is freed there, so a 20 MB document's build would hold every page it ever read. Both calls are
no-ops where the C library is not glibc.
"""

from __future__ import annotations

import ctypes
import gc

M_ARENA_MAX = -8  # glibc's mallopt parameters
M_MMAP_THRESHOLD = -3


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt, libc.malloc_trim  # noqa: B018  (both present: glibc)
    except (AttributeError, OSError):
        return None
    return libc


def limit_malloc_arenas(arenas: int = 2) -> None:
    """At most ``arenas`` malloc arenas for threads started from now on (call before they start)."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(M_ARENA_MAX, arenas)


def fixed_mmap_threshold(nbytes: int = 1 << 20) -> None:
    """Blocks of ``nbytes`` and more get pages of their own, handed back when freed: glibc otherwise raises its
    threshold to the largest block freed, and a server that decoded a few 5 MB requests keeps their pages."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(M_MMAP_THRESHOLD, nbytes)


def return_freed_memory() -> None:
    """Collect garbage and give the freed heap back to the system."""
    gc.collect()
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
