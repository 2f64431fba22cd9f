"""Bounded reads: a .gz expands only up to TRAINDOC_MAX_LOG_GB (a gzip bomb is refused in one line), a line of
50 MB costs its cap in memory and the OOM line after it is still found, and a folder's unreadable files are left
out with one warning instead of refusing the job."""

from __future__ import annotations

import gzip
import io
import logging
import os
import tracemalloc
import zlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.logs import read_logs
from common.errors import InputError, TraindocError
from common.settings import Settings
from jobs.reader import read_job
from jobs.streams import LINE_BYTES, cut_long_lines

OOM = b"[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
STEP = b"[rank0]: step 12 loss 0.513 lr 1.9e-05\n"
SMALL_CAP_GB = "0.004"  # about 4.3 MB
BOMB_BYTES = 8 * 1024 * 1024  # what the bombs below expand to: twice the cap


def _one_line(exc: TraindocError) -> None:
    assert exc.message and "\n" not in exc.message and "\n" not in (exc.hint or "")


def _bomb() -> bytes:
    return gzip.compress(STEP * (BOMB_BYTES // len(STEP)), compresslevel=9)


def test_a_gzip_bomb_is_refused_in_one_line_naming_the_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINDOC_MAX_LOG_GB", SMALL_CAP_GB)
    bomb = tmp_path / "rank0.log.gz"
    bomb.write_bytes(_bomb())
    assert bomb.stat().st_size < BOMB_BYTES // 100  # small on disk, eight megabytes expanded
    with pytest.raises(InputError) as caught:
        read_logs([bomb])
    _one_line(caught.value)
    assert "rank0.log.gz" in caught.value.message and "0.004 GB" in caught.value.message
    assert "TRAINDOC_MAX_LOG_GB" in (caught.value.hint or "")


def test_a_bomb_whose_trailer_understates_its_size_is_refused_while_it_expands(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The last member of a multi-member .gz states only its own size: the stream is counted as it expands."""
    monkeypatch.setenv("TRAINDOC_MAX_LOG_GB", SMALL_CAP_GB)
    bomb = tmp_path / "rank0.log.gz"
    bomb.write_bytes(_bomb() + gzip.compress(b"done\n"))
    with pytest.raises(InputError) as caught:
        list(read_job([bomb]))
    _one_line(caught.value)
    assert "more than 0.004 GB" in caught.value.message


def test_the_cap_counts_every_gz_of_the_job_together(tmp_path: Path) -> None:
    half = STEP * (3 * 1024 * 1024 // len(STEP))
    for name in ("rank0.log.gz", "rank1.log.gz"):
        (tmp_path / name).write_bytes(gzip.compress(half))
    assert sum(1 for _ in read_job([tmp_path / "rank0.log.gz"], max_log_bytes=4 * 1024 * 1024)) > 0
    with pytest.raises(InputError):
        list(read_job([tmp_path], max_log_bytes=4 * 1024 * 1024))


def test_a_gz_within_the_cap_is_read_like_the_plain_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRAINDOC_MAX_LOG_GB", SMALL_CAP_GB)
    data = STEP * 20_000 + OOM
    (tmp_path / "rank3.log").write_bytes(data)
    (tmp_path / "gz").mkdir()
    (tmp_path / "gz" / "rank3.log.gz").write_bytes(gzip.compress(data))
    plain = [line.text for line in read_job([tmp_path / "rank3.log"])]
    packed = [line.text for line in read_job([tmp_path / "gz" / "rank3.log.gz"])]
    assert plain == packed and packed[-1].startswith("torch.OutOfMemoryError")


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0", "1e309", "x"])
def test_the_cap_setting_refuses_what_is_not_a_size_in_one_line(value: str) -> None:
    with pytest.raises(TraindocError) as caught:
        Settings.from_env({"TRAINDOC_MAX_LOG_GB": value})
    _one_line(caught.value)
    assert "TRAINDOC_MAX_LOG_GB" in caught.value.message


def _long_line_log(prefix: bytes = b"RuntimeError: ") -> bytes:
    return b"[rank0]: starting\n" + prefix + b"x" * (50 * 1024 * 1024) + b"\n" + OOM + b"[rank0]: exiting\n"


def _assert_oom_found(reading) -> None:  # type: ignore[no-untyped-def]
    assert any("OutOfMemoryError" in line for line in reading.errors)
    assert reading.diagnosis is not None and reading.diagnosis.root_cause is not None
    assert reading.diagnosis.root_cause.category == "oom"


def test_a_50_mb_line_costs_its_cap_and_the_oom_line_after_it_is_found(tmp_path: Path) -> None:
    path = tmp_path / "rank0.log"
    path.write_bytes(_long_line_log())
    tracemalloc.start()
    try:
        lines = list(read_job([path]))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024 * 1024  # blocks of 256 KB and a cut line, not the 50 MB line
    assert len(lines) == 4  # the long line is one line, cut; the lines after it are read
    assert lines[2].text.startswith("torch.OutOfMemoryError")
    _assert_oom_found(read_logs([path]))


def test_a_50_mb_line_on_standard_input_and_in_a_gz(tmp_path: Path) -> None:
    data = _long_line_log(b"Error ")
    _assert_oom_found(read_logs([Path("-")], io.BytesIO(data)))
    packed = tmp_path / "rank0.log.gz"
    packed.write_bytes(gzip.compress(data, compresslevel=1))
    tracemalloc.start()
    try:
        lines = list(read_job([packed]))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024 * 1024 and len(lines) == 4
    _assert_oom_found(read_logs([packed]))


def test_a_progress_bar_line_shows_its_last_state(tmp_path: Path) -> None:
    bar = b"".join(b"\r %3d%%|#####     | %d/1000" % (i % 100, i) for i in range(200_000))
    path = tmp_path / "rank0.log"
    path.write_bytes(b"[rank0]: starting\n" + bar + b"\rRuntimeError: boom\n[rank0]: after\n")
    assert [line.text for line in read_job([path])] == ["starting", "RuntimeError: boom", "after"]


def _reference_cut(data: bytes, cap: int) -> bytes:
    out = []
    for line in data.split(b"\n"):
        if len(line) > cap:
            tail = line[cap:][-cap:]
            line = line[:cap] + (tail[tail.find(b"\r"):] if b"\r" in tail else b"")
        out.append(line)
    return b"\n".join(out)


@given(data=st.lists(st.sampled_from([b"a", b"bb", b"\n", b"\r", b"x" * 9, b"\xe4\xb8\xad"]), max_size=80).map(b"".join),
       cuts=st.lists(st.integers(min_value=1, max_value=40), max_size=6), cap=st.integers(min_value=2, max_value=12))
def test_cutting_long_lines_in_blocks_is_cutting_each_line(data: bytes, cuts: list[int], cap: int) -> None:
    blocks, start = [], 0
    for size in cuts:
        blocks.append(data[start:start + size])
        start += size
    blocks.append(data[start:])
    assert b"".join(cut_long_lines([b for b in blocks if b], cap)) == _reference_cut(data, cap)


def test_the_line_cap_keeps_what_a_log_line_shows() -> None:
    assert LINE_BYTES >= 4 * 2000  # jobs.lines.MAX_LINE characters of UTF-8 fit in what is kept


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_unreadable_files_in_a_folder_are_left_out_with_one_warning(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "rank0.log").write_bytes(STEP * 3)
    (tmp_path / "rank3.log").write_bytes(OOM)
    for name in ("rank1.log", "rank2.log.gz"):
        (tmp_path / name).write_bytes(STEP)
        (tmp_path / name).chmod(0)
    try:
        with caplog.at_level(logging.WARNING, logger="jobs.reader"):
            reading = read_logs([tmp_path])
    finally:
        for name in ("rank1.log", "rank2.log.gz"):
            (tmp_path / name).chmod(0o600)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "rank1.log" in warnings[0] and "rank2.log.gz" in warnings[0]
    _assert_oom_found(reading)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_a_folder_of_only_unreadable_files_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "rank0.log").write_bytes(OOM)
    (tmp_path / "rank0.log").chmod(0)
    try:
        with pytest.raises(InputError) as caught:
            list(read_job([tmp_path]))
    finally:
        (tmp_path / "rank0.log").chmod(0o600)
    _one_line(caught.value)
    assert "permission denied" in caught.value.message


def test_a_bomb_within_the_cap_is_refused_by_how_much_it_grows(tmp_path: Path) -> None:
    """Under the default cap (2 GB), a .gz 300 times its size is refused after 64 MB, not read to its end."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = STEP * (1024 * 1024 // len(STEP))
    bomb = tmp_path / "rank0.log.gz"
    with bomb.open("wb") as handle:
        for _ in range(96):
            handle.write(packer.compress(chunk))
        handle.write(packer.flush())
    assert bomb.stat().st_size * 200 < 96 * len(chunk)
    with pytest.raises(InputError) as caught:
        list(read_job([bomb]))
    _one_line(caught.value)
    assert "gzip bomb" in caught.value.message
