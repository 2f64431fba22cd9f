"""A torch.compile failure is its own kind (runbook torch_compile_failure): each line Dynamo, Inductor or Triton prints
for it picks the runbook, alone; a CUDA OOM, a DeepSpeed op that fails to build at first use and a code error that
only passes through Dynamo (wrong devices) keep their own runbooks. The Dynamo and Inductor messages are checked
against real torch on CPU: a backend that raises, a graph break under fullgraph=True, the recompile limit, a graph
break in the graph_breaks log, and Inductor without a working C++ compiler."""

from __future__ import annotations

import logging
import traceback
from collections.abc import Iterator

import pytest
import torch
import torch._dynamo
import torch._inductor.config
from runbook_messages import assert_a_line_per_message, assert_picks

from runbooks.catalog import runbooks
from runbooks.choose import for_lines

KIND = "torch_compile_failure"

# One real-shaped line per message in the runbook's front matter (the same order), as torch and Triton print it.
LINES = [
    "W1127 10:02:11.085000 2071 torch/_dynamo/convert_frame.py:1994] [2/8] torch._dynamo hit config.recompile_limit (8)",
    "RuntimeError: Failed to find C compiler. Please specify via CC environment variable.",
    "torch._inductor.exc.InductorError: InvalidCxxCompiler: No working C++ compiler found in "
    "torch._inductor.config.cpp.cxx: ('g++',)",
    "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 131072, Hardware limit: 101376. "
    "Reducing block sizes or `num_stages` may help.",
    "triton.compiler.errors.CompilationError: at 12:8:",
    "[rank0]: torch._inductor.exc.InductorError: AssertionError: unexpected stride in a fused kernel",
    "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:",
    "torch._dynamo.exc.Unsupported: Failed to trace builtin operator",
    "Graph break in user code at /work/model.py:131",
]
# An older torch names the same limit by its former name.
OLD_LIMIT = "torch._dynamo hit config.cache_size_limit (8)"

UNRELATED = [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
    "79.10 GiB of which 1.19 GiB is free. Including non-PyTorch memory, this process has 77.90 GiB memory in use.",
    "RuntimeError: Error building extension 'fused_adam'",
    "[rank1]: subprocess.CalledProcessError: Command '['ninja', '-v']' returned non-zero exit status 1.",
]
# A code error that Dynamo only reports while tracing still leads to the error's own runbook.
WRONG_DEVICE_UNDER_COMPILE = (
    "torch._dynamo.exc.TorchRuntimeError: Dynamo failed to run FX node with fake tensors: call_function "
    "<built-in function add>: got RuntimeError('Expected all tensors to be on the same device, but found at least "
    "two devices, cuda:0 and cpu!')")


def test_every_message_has_a_line_here_and_both_languages_list_the_same_ones() -> None:
    assert_a_line_per_message(KIND, LINES)


@pytest.mark.parametrize("line", [*LINES, OLD_LIMIT])
def test_each_line_the_compiler_prints_picks_the_runbook(line: str) -> None:
    assert_picks(KIND, [line])


@pytest.mark.parametrize("line", UNRELATED)
def test_an_unrelated_line_picks_no_torch_compile_runbook(line: str) -> None:
    chosen = for_lines([line])
    assert chosen is None or chosen.kind != KIND, (line, chosen.kind)


def test_a_device_error_raised_through_dynamo_keeps_its_own_runbook() -> None:
    chosen = for_lines([WRONG_DEVICE_UNDER_COMPILE])
    assert chosen is not None and chosen.kind == "wrong_device"


def _messages() -> tuple[str, ...]:
    return runbooks()[(KIND, "en")].messages


def _last_line(error: BaseException) -> str:
    """The exception's first printed line, as a traceback shows it (module-qualified class name)."""
    return traceback.format_exception_only(type(error), error)[0].splitlines()[0]


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Iterator[None]:
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def test_a_backend_that_raises_prints_backend_compiler_failed() -> None:
    def failing_backend(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> None:
        raise RuntimeError("the backend gave up")

    compiled = torch.compile(lambda x: x.sin() + 1, backend=failing_backend)
    with pytest.raises(torch._dynamo.exc.BackendCompilerFailed) as raised:
        compiled(torch.ones(3))
    line = _last_line(raised.value)
    assert line.startswith("torch._dynamo.exc.BackendCompilerFailed") and "BackendCompilerFailed: backend=" in line
    assert for_lines([line]).kind == KIND  # type: ignore[union-attr]


def test_a_graph_break_under_fullgraph_raises_unsupported() -> None:
    def reads_a_file(x: torch.Tensor) -> torch.Tensor:
        with open(__file__) as handle:
            return x + len(handle.read())

    with pytest.raises(torch._dynamo.exc.Unsupported) as raised:
        torch.compile(reads_a_file, backend="eager", fullgraph=True)(torch.ones(2))
    assert "torch._dynamo.exc.Unsupported" in _last_line(raised.value)


def test_changing_shapes_hit_the_recompile_limit_and_log_it() -> None:
    collect = _Collect()
    logger = logging.getLogger("torch._dynamo.convert_frame")
    logger.addHandler(collect)
    try:
        compiled = torch.compile(lambda x: x + 1, backend="eager", dynamic=False)
        for size in range(1, torch._dynamo.config.recompile_limit + 3):
            compiled(torch.ones(size))
    finally:
        logger.removeHandler(collect)
    assert any(_messages()[0] in line and "recompile_limit" in line for line in collect.lines), collect.lines


def test_the_graph_breaks_log_names_the_user_line() -> None:
    collect = _Collect()
    logger = logging.getLogger("torch._dynamo.symbolic_convert.__graph_breaks")
    torch._logging.set_logs(graph_breaks=True)
    logger.addHandler(collect)
    try:
        def prints(x: torch.Tensor) -> torch.Tensor:
            y = x + 1
            print("a graph break")
            return y * 2

        torch.compile(prints, backend="eager")(torch.ones(2))
    finally:
        logger.removeHandler(collect)
        torch._logging.set_logs()
    assert any(line.startswith(_messages()[-1]) for line in collect.lines), collect.lines


def test_inductor_without_a_cxx_compiler_raises_inductor_error() -> None:
    with torch._inductor.config.patch({"cpp.cxx": ("/nonexistent/g++",), "fx_graph_cache": False}):
        compiled = torch.compile(lambda x: (x.sin() + 1).cos())
        with pytest.raises(torch._inductor.exc.InductorError) as raised:
            compiled(torch.ones(8))
    line = _last_line(raised.value)
    assert "torch._inductor.exc.InductorError" in line
    assert "No working C++ compiler found in torch._inductor.config.cpp.cxx" in line
    assert for_lines([line]).kind == KIND  # type: ignore[union-attr]


def test_both_environment_variables_that_switch_compilation_off_exist() -> None:
    import inspect

    assert "TORCH_COMPILE_DISABLE" in inspect.getsource(torch._dynamo.config)
    assert "TORCHDYNAMO_DISABLE" in inspect.getsource(torch._dynamo.eval_frame)
    assert torch._dynamo.config.recompile_limit == 8 and hasattr(torch._dynamo, "mark_dynamic")
