"""One file of named arrays, laid out to be memory-mapped: what a cold question reads of the index.

The file is a small JSON header (what each array is: its dtype, shape and offset) followed by the arrays
themselves, each aligned, so that opening it costs one read of the header and one ``mmap``; an array is a
view of the mapped file and a page of it is read from disk only when a question touches it (the postings of
the question's words, the texts of the sections it cites). Strings are packed as one UTF-8 blob with their
offsets (``Strings``) and decoded one at a time; an inverted index is a sorted term column with the offsets of
each term's rows (``Postings``), searched by bisection. No pickle: a file that does not parse is no snapshot.

A file is whole or it is no pack: the opening carries a CRC-32 of every byte after it (the header, the padding,
every array), checked when the file is opened, so a block of garbage anywhere (a bad disk, a stray write) makes
``read_pack`` refuse the file rather than hand back an index that points outside itself or answers differently.
zlib's CRC-32 runs at several GB/s: about 1 ms for the 4 MB snapshot of the built-in corpus, 0.25 ms a MB for a
bigger one, of pages that a question reads anyway (the vectors, the norms) or that the page cache holds. What a
checksum cannot vouch for (a file written whole by other code) the readers check too: ``Strings`` and ``Postings``
refuse offsets that leave their arrays, and ``within`` is how an index column is checked against what it indexes.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

MAGIC = b"TDPACK\x00\x02"  # 2: the opening carries a CRC-32 of the rest of the file
ALIGN = 64  # every array starts on a cache line
_OPENING = struct.Struct("<QI")  # after MAGIC: the header's length, the CRC-32 of everything after the opening
_OPENED = len(MAGIC) + _OPENING.size


class PackError(ValueError):
    """The file is not a pack this code can read (another format, truncated, damaged)."""


def write_pack(handle: Any, header: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``header`` (JSON-able) and ``arrays`` to the open binary ``handle``, with the checksum ``read_pack``
    checks."""
    layout: dict[str, dict[str, Any]] = {}
    offset = 0
    for name, array in arrays.items():
        layout[name] = {"dtype": array.dtype.str, "shape": list(array.shape), "offset": offset}
        offset += _padded(array.nbytes)
    text = json.dumps({**header, "arrays": layout}, ensure_ascii=False, separators=(",", ":")).encode()
    pieces: list[bytes | memoryview] = [text, b"\0" * (_padded(_OPENED + len(text)) - _OPENED - len(text))]
    for array in arrays.values():
        data = _bytes_of(array)
        pieces += [data, b"\0" * (_padded(len(data)) - len(data))]
    checksum = 0
    for piece in pieces:
        checksum = zlib.crc32(piece, checksum)
    handle.write(MAGIC + _OPENING.pack(len(text), checksum))
    for piece in pieces:
        handle.write(piece)


def read_pack(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(header, arrays): the arrays are read-only views of the mapped file. Raises OSError or PackError (another
    format, a file cut short, a checksum that does not match: damage anywhere)."""
    with path.open("rb") as handle:
        opening = handle.read(_OPENED)
        if len(opening) < _OPENED or not opening.startswith(MAGIC):
            raise PackError(f"{path} is not a traindoc pack")
        length, checksum = _OPENING.unpack(opening[len(MAGIC):])
        size = os.fstat(handle.fileno()).st_size
        start = _padded(_OPENED + length)
        if start > size:
            raise PackError(f"{path} is truncated")
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    with memoryview(mapped) as view:
        if zlib.crc32(view[_OPENED:]) != checksum:
            raise PackError(f"{path} is damaged: its checksum does not match")
        try:
            header = json.loads(bytes(view[_OPENED:_OPENED + length]))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise PackError(f"{path}: damaged header: {exc}") from exc
    if not isinstance(header, dict) or not isinstance(header.get("arrays"), dict):
        raise PackError(f"{path}: the header lists no arrays")
    arrays: dict[str, np.ndarray] = {}
    for name, row in header.pop("arrays").items():
        try:
            dtype, shape, offset = np.dtype(row["dtype"]), tuple(int(n) for n in row["shape"]), start + int(row["offset"])
        except (KeyError, TypeError, ValueError) as exc:
            raise PackError(f"{path}: array {name!r} is not described: {exc}") from exc
        if dtype.hasobject or offset < start or min(shape, default=0) < 0:
            raise PackError(f"{path}: array {name!r} is not described")
        count = int(np.prod(shape, dtype=np.int64))
        if offset + count * dtype.itemsize > size:
            raise PackError(f"{path} is truncated (array {name!r})")
        array = np.frombuffer(mapped, dtype=dtype, count=count, offset=offset) if count else np.empty(0, dtype=dtype)
        arrays[name] = array.reshape(shape)
    return header, arrays


def _bytes_of(array: np.ndarray) -> memoryview:
    """The array's bytes, in C order (no copy when it is contiguous)."""
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8).data


def within(values: np.ndarray, limit: int, what: str) -> None:
    """Every one of ``values`` (row numbers read from a file) is in ``range(limit)``; else PackError: a number read
    from disk never indexes past what it indexes."""
    if values.ndim != 1 or (len(values) and (int(values.min()) < 0 or int(values.max()) >= limit)):
        raise PackError(f"{what}: a row number out of range({limit})")


def _check_offsets(offsets: np.ndarray, length: int, what: str) -> None:
    """``offsets`` cut something ``length`` long into parts: they start at 0, never decrease and end at ``length``."""
    if (offsets.ndim != 1 or not len(offsets) or int(offsets[0]) != 0 or int(offsets[-1]) != length
            or bool(np.any(offsets[1:] < offsets[:-1]))):
        raise PackError(f"{what}: offsets out of range")


def _padded(size: int) -> int:
    return -(-size // ALIGN) * ALIGN


def encoded(value: str) -> bytes:
    return value.encode("utf-8", "surrogatepass")


class Strings(Sequence[str]):
    """Strings packed as one UTF-8 blob and their byte offsets (``len + 1`` of them); each decoded when read."""

    def __init__(self, blob: np.ndarray, offsets: np.ndarray) -> None:
        """Raises PackError when ``offsets`` do not cut ``blob`` into parts (a damaged or foreign file)."""
        _check_offsets(offsets, len(blob), "strings")
        self._blob = blob
        self._offsets = offsets

    @staticmethod
    def pack(values: Iterable[str]) -> tuple[np.ndarray, np.ndarray]:
        """(blob, offsets) of ``values``, in their order."""
        parts = [encoded(v) for v in values]
        offsets = np.zeros(len(parts) + 1, dtype=np.int64)
        np.cumsum([len(p) for p in parts], out=offsets[1:])
        return np.frombuffer(b"".join(parts), dtype=np.uint8), offsets

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def __getitem__(self, index: int) -> str:  # type: ignore[override]
        return self.raw(index).decode("utf-8", "surrogatepass")

    def raw(self, index: int) -> bytes:
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._blob[int(self._offsets[index]):int(self._offsets[index + 1])].tobytes()

    def find(self, value: str) -> int | None:
        """The position of ``value`` in strings sorted by their UTF-8 bytes (``Postings``), by bisection."""
        wanted, low, high = encoded(value), 0, len(self)
        while low < high:
            middle = (low + high) // 2
            if self.raw(middle) < wanted:
                low = middle + 1
            else:
                high = middle
        return low if low < len(self) and self.raw(low) == wanted else None


class Postings:
    """An inverted index as parallel columns: term ``i``'s rows are ``columns[c][offsets[i]:offsets[i + 1]]``."""

    def __init__(self, terms: Strings, offsets: np.ndarray, columns: Sequence[np.ndarray]) -> None:
        """Raises PackError unless ``offsets`` has a row for every term and cuts every column (of one length)."""
        rows = len(columns[0]) if columns else 0
        if len(offsets) != len(terms) + 1 or any(column.ndim != 1 or len(column) != rows for column in columns):
            raise PackError("postings: columns and terms do not agree")
        _check_offsets(offsets, rows, "postings")
        self._terms = terms
        self._offsets = offsets
        self._columns = tuple(columns)

    @staticmethod
    def pack(rows: Mapping[str, Sequence[np.ndarray]], dtypes: Sequence[Any]) -> dict[str, np.ndarray]:
        """The arrays of ``rows`` (term -> its columns), terms sorted by their UTF-8 bytes: ``terms``, ``term_offsets``
        (the blob's), ``offsets`` (the rows') and ``column0``, ``column1``, ..."""
        terms = sorted(rows, key=encoded)
        blob, term_offsets = Strings.pack(terms)
        lengths = [len(rows[t][0]) for t in terms]
        offsets = np.zeros(len(terms) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        packed = {"terms": blob, "term_offsets": term_offsets, "offsets": offsets}
        for number, dtype in enumerate(dtypes):
            parts = [np.asarray(rows[t][number], dtype=dtype) for t in terms]
            packed[f"column{number}"] = np.concatenate(parts) if parts else np.empty(0, dtype=dtype)
        return packed

    @classmethod
    def unpack(cls, arrays: Mapping[str, np.ndarray], prefix: str) -> Postings:
        columns: list[np.ndarray] = []
        while f"{prefix}column{len(columns)}" in arrays:
            columns.append(arrays[f"{prefix}column{len(columns)}"])
        terms = Strings(arrays[f"{prefix}terms"], arrays[f"{prefix}term_offsets"])
        return cls(terms, arrays[f"{prefix}offsets"], columns)

    @property
    def columns(self) -> tuple[np.ndarray, ...]:
        """Every term's rows together, column by column (what a reader checks against what they index)."""
        return self._columns

    def get(self, term: str) -> tuple[np.ndarray, ...] | None:
        row = self._terms.find(term)
        if row is None:
            return None
        start, end = int(self._offsets[row]), int(self._offsets[row + 1])
        return tuple(column[start:end] for column in self._columns)

    def items(self) -> Iterator[tuple[str, tuple[np.ndarray, ...]]]:
        for row in range(len(self._terms)):
            start, end = int(self._offsets[row]), int(self._offsets[row + 1])
            yield self._terms[row], tuple(column[start:end] for column in self._columns)

    def __len__(self) -> int:
        return len(self._terms)


def prefixed(prefix: str, arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {f"{prefix}{name}": array for name, array in arrays.items()}
