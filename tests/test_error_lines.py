"""Which lines are error lines: a failure word the line denies ("没有报错", "no errors") does not make one."""

from __future__ import annotations

import pytest

from corpus.errorlines import error_lines, is_error_line


@pytest.mark.parametrize("line", [
    "加载完模型之后就一直停在这里，也没有报错",
    "程序没反应了，没有任何错误信息",
    "跑了一晚上不动，不报错也不退出",
    "the run just sits there with no errors at all",
])
def test_a_line_that_denies_an_error_is_not_an_error_line(line: str) -> None:
    assert not is_error_line(line)


@pytest.mark.parametrize("line", [
    "训练卡住了，没有报错",  # the hang itself is still reported
    "没有报错，但是显存溢出：CUDA out of memory",  # another failure on the same line
    "RuntimeError: no error handler registered",  # an exception's own words
    "报错如下：",
    "NCCL WARN NET/Socket : no usable interface found",
])
def test_a_line_with_a_failure_besides_the_denied_one_stays_an_error_line(line: str) -> None:
    assert is_error_line(line)


def test_a_megabyte_of_denials_is_read_in_bounded_time() -> None:
    text = ("没有报错" * 250_000) + "\nRuntimeError: boom"
    assert error_lines(text.splitlines()) == ["RuntimeError: boom"]
