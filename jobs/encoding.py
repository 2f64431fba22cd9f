"""A log's text encoding, told from its first bytes, and its blocks turned into UTF-8 for the reader.

Almost every log is UTF-8 (or ASCII), read as it is. PowerShell's ``>`` and ``Out-File`` save UTF-16 (little-endian,
with a byte-order mark, and CRLF line ends); a Windows tool may write it without the mark. Read as UTF-8, such a
log is a NUL between every letter: no error line matches and the answer says no document answers it. A mark
decides; without one, NULs in every other byte of the first kilobytes (ASCII text as UTF-16) do. A UTF-8 mark is
dropped. CRLF needs nothing here: every line's ``\\r`` goes when it is cleaned (``jobs.lines.clean``).
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable, Iterator

MARKS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
SAMPLE_PAIRS = 512  # byte pairs looked at, without a mark
NUL_SHARE = 0.7  # of those pairs, this many with a NUL on the same side (and almost none on the other): UTF-16


def sniff_encoding(sample: bytes) -> str | None:
    """The codec a log's first bytes call for, or None for UTF-8 as it is (the common case)."""
    for mark, codec in MARKS:
        if sample.startswith(mark):
            return codec
    pairs = [sample[i:i + 2] for i in range(0, min(len(sample), 2 * SAMPLE_PAIRS) - 1, 2)]
    if len(pairs) < 4:
        return None
    high_nul = sum(1 for p in pairs if p[1] == 0 and p[0] != 0) / len(pairs)  # "A\0": little-endian
    low_nul = sum(1 for p in pairs if p[0] == 0 and p[1] != 0) / len(pairs)  # "\0A": big-endian
    if high_nul >= NUL_SHARE and low_nul < 0.05:
        return "utf-16-le"
    if low_nul >= NUL_SHARE and high_nul < 0.05:
        return "utf-16-be"
    return None


def as_utf8(blocks: Iterable[bytes], codec: str | None) -> Iterator[bytes]:
    """``blocks`` decoded with ``codec`` (None: passed on as they are) and encoded as UTF-8; a character split
    across two blocks is decoded whole, and bytes that are not text become U+FFFD."""
    if codec is None:
        yield from blocks
        return
    decoder = codecs.getincrementaldecoder(codec)("replace")
    for block in blocks:
        if text := decoder.decode(block):
            yield text.encode("utf-8", "surrogatepass")
    if rest := decoder.decode(b"", final=True):
        yield rest.encode("utf-8", "surrogatepass")
