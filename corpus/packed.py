"""One file of named arrays, laid out to be memory-mapped: what a cold question reads of the index.

The file is a small JSON header (what each array is: its dtype, shape and offset) followed by the arrays
themselves, each aligned, so that opening it costs one read of the header and one ``mmap``; an array is a
view of the mapped file and a page of it is read from disk only when a question touches it (the postings of
the question's words, the texts of the sections it cites). Strings are packed as one UTF-8 blob with their
offsets (``Strings``) and decoded one at a time; an inverted index is a sorted term column with the offsets of
each term's rows (``Postings``), searched by bisection. No pickle: a file that does not parse is no snapshot.
"""

from __future__ import annotations

import json
import mmap
import os
import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

MAGIC = b"TDPACK\x00\x01"
ALIGN = 64  # every array starts on a cache line
_LENGTH = struct.Struct("<Q")


class PackError(ValueError):
    """The file is not a pack this code can read (another format, truncated, damaged)."""


def write_pack(handle: Any, header: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``header`` (JSON-able) and ``arrays`` to the open binary ``handle``."""
    layout: dict[str, dict[str, Any]] = {}
    offset = 0
    for name, array in arrays.items():
        layout[name] = {"dtype": array.dtype.str, "shape": list(array.shape), "offset": offset}
        offset += _padded(array.nbytes)
    text = json.dumps({**header, "arrays": layout}, ensure_ascii=False, separators=(",", ":")).encode()
    start = _padded(len(MAGIC) + _LENGTH.size + len(text))
    handle.write(MAGIC + _LENGTH.pack(len(text)) + text)
    handle.write(b"\0" * (start - len(MAGIC) - _LENGTH.size - len(text)))
    for array in arrays.values():
        data = np.ascontiguousarray(array).tobytes()
        handle.write(data + b"\0" * (_padded(len(data)) - len(data)))


def read_pack(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(header, arrays): the arrays are read-only views of the mapped file. Raises OSError or PackError."""
    with path.open("rb") as handle:
        opening = handle.read(len(MAGIC) + _LENGTH.size)
        if len(opening) < len(MAGIC) + _LENGTH.size or not opening.startswith(MAGIC):
            raise PackError(f"{path} is not a traindoc pack")
        (length,) = _LENGTH.unpack(opening[len(MAGIC):])
        size = os.fstat(handle.fileno()).st_size
        start = _padded(len(MAGIC) + _LENGTH.size + length)
        if start > size:
            raise PackError(f"{path} is truncated")
        try:
            header = json.loads(handle.read(length))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise PackError(f"{path}: damaged header: {exc}") from exc
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) if size > start else b""
    if not isinstance(header, dict) or not isinstance(header.get("arrays"), dict):
        raise PackError(f"{path}: the header lists no arrays")
    arrays: dict[str, np.ndarray] = {}
    for name, row in header.pop("arrays").items():
        try:
            dtype, shape, offset = np.dtype(row["dtype"]), tuple(int(n) for n in row["shape"]), start + int(row["offset"])
        except (KeyError, TypeError, ValueError) as exc:
            raise PackError(f"{path}: array {name!r} is not described: {exc}") from exc
        count = int(np.prod(shape, dtype=np.int64))
        if offset + count * dtype.itemsize > size:
            raise PackError(f"{path} is truncated (array {name!r})")
        array = np.frombuffer(mapped, dtype=dtype, count=count, offset=offset) if count else np.empty(0, dtype=dtype)
        arrays[name] = array.reshape(shape)
    return header, arrays


def _padded(size: int) -> int:
    return -(-size // ALIGN) * ALIGN


def encoded(value: str) -> bytes:
    return value.encode("utf-8", "surrogatepass")


class Strings(Sequence[str]):
    """Strings packed as one UTF-8 blob and their byte offsets (``len + 1`` of them); each decoded when read."""

    def __init__(self, blob: np.ndarray, offsets: np.ndarray) -> None:
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
