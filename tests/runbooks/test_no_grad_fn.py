"""A loss with no grad_fn is its own failure (runbook no_grad_fn): each line shape PyTorch prints for it picks the
runbook, alone or as a traceback's last line; a DDP reducer error, a CUDA OOM or the sibling "backward through the
graph a second time" do not. The messages and the causes the runbook names are checked against real torch on CPU:
a frozen model, reentrant checkpointing with inputs that do not require grad, a loss computed without grad."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from runbook_messages import assert_a_line_per_message, assert_picks
from torch.utils.checkpoint import checkpoint

from runbooks.catalog import runbooks
from runbooks.choose import for_lines

KIND = "no_grad_fn"
SITE = "/opt/venv/lib/python3.11/site-packages"

# One real-shaped line per message in the runbook's front matter (the same order), as PyTorch prints it.
LINES = [
    "RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn",
    "[rank1]: RuntimeError: element 1 of tensors does not require grad and does not have a grad_fn",
]
# The reentrant checkpoint's warning: healthy LoRA runs with a trainable head print it too, so it names no failure.
CHECKPOINT_WARNING = (f"{SITE}/torch/utils/checkpoint.py:90: UserWarning: None of the inputs have requires_grad=True. "
                      "Gradients will be None")

TRACEBACK = [
    "[rank0]: Traceback (most recent call last):",
    '[rank0]:   File "/work/train.py", line 88, in <module>',
    "[rank0]:     accelerator.backward(loss)",
    f'[rank0]:   File "{SITE}/torch/autograd/graph.py", line 829, in _engine_run_backward',
    "[rank0]:     return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass",
    "[rank0]: RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn",
]

DDP_READY_TWICE = ("RuntimeError: Expected to mark a variable ready only once. This error is caused by one of the following "
                   "reasons: 1) Use of a module parameter outside the `forward` function.")
UNRELATED = [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
    "79.10 GiB of which 1.19 GiB is free. Including non-PyTorch memory, this process has 77.90 GiB memory in use.",
    # a graph freed by the first backward is another failure (retain_graph), not a loss outside the graph
    "RuntimeError: Trying to backward through the graph a second time (or directly access saved tensors after they "
    "have already been freed).",
    "RuntimeError: One of the differentiated Tensors does not require grad",
    CHECKPOINT_WARNING,
]


def test_every_message_has_a_line_here_and_both_languages_list_the_same_ones() -> None:
    assert_a_line_per_message(KIND, LINES)


@pytest.mark.parametrize("line", LINES)
def test_each_line_pytorch_prints_picks_the_runbook(line: str) -> None:
    assert_picks(KIND, [line])


def test_a_whole_traceback_ending_in_the_message_picks_it() -> None:
    chosen = for_lines(TRACEBACK)
    assert chosen is not None and chosen.kind == KIND


def test_the_ddp_ready_twice_error_still_picks_its_own_runbook() -> None:
    chosen = for_lines([DDP_READY_TWICE])
    assert chosen is not None and chosen.kind == "ddp_unused_parameters"


@pytest.mark.parametrize("line", UNRELATED)
def test_an_unrelated_line_picks_no_no_grad_fn_runbook(line: str) -> None:
    chosen = for_lines([line])
    assert chosen is None or chosen.kind != KIND, (line, chosen.kind)


def _first_message() -> str:
    return runbooks()[(KIND, "en")].messages[0]


def test_backward_through_a_frozen_layer_prints_the_first_message_exactly() -> None:
    layer = torch.nn.Linear(4, 2).requires_grad_(False)
    loss = layer(torch.randn(3, 4)).sum()
    assert loss.grad_fn is None and sum(p.requires_grad for p in layer.parameters()) == 0  # the runbook's check
    with pytest.raises(RuntimeError) as raised:
        loss.backward()
    assert _first_message() in str(raised.value)


def test_autograd_grad_names_the_output_that_is_not_in_the_graph() -> None:
    weight = torch.randn(2, requires_grad=True)
    with pytest.raises(RuntimeError) as raised:
        torch.autograd.grad([weight.sum(), torch.ones(())], [weight])
    assert runbooks()[(KIND, "en")].messages[1] in str(raised.value)
    assert "element 1 of tensors" in str(raised.value)


@pytest.mark.parametrize("detach", [
    lambda loss: loss.detach(),
    lambda loss: torch.tensor(loss.item()),
    lambda loss: torch.from_numpy(loss.detach().numpy()),
], ids=["detach", "item", "numpy"])
def test_a_loss_taken_out_of_the_graph_fails_alike(detach: Callable[[torch.Tensor], torch.Tensor]) -> None:
    layer = torch.nn.Linear(4, 1)
    with pytest.raises(RuntimeError, match=_first_message()):
        detach(layer(torch.randn(3, 4)).sum()).backward()


@pytest.mark.parametrize("mode", [torch.no_grad, torch.inference_mode], ids=["no_grad", "inference_mode"])
def test_a_loss_computed_without_grad_mode_fails_alike(mode: type) -> None:
    layer = torch.nn.Linear(4, 1)
    with mode():
        loss = layer(torch.randn(3, 4)).sum()
    with pytest.raises(RuntimeError, match=_first_message()):
        loss.backward()


def _frozen_embedding_and_trainable_block() -> tuple[torch.Tensor, torch.nn.Linear]:
    embedding = torch.nn.Linear(4, 4).requires_grad_(False)  # a frozen base: its output does not require grad
    return embedding(torch.randn(2, 4)), torch.nn.Linear(4, 4)  # the block stands for a LoRA-adapted layer


def test_reentrant_checkpointing_over_inputs_without_grad_warns_then_fails() -> None:
    hidden, block = _frozen_embedding_and_trainable_block()
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        loss = checkpoint(block, hidden, use_reentrant=True).sum()
    with pytest.raises(RuntimeError, match=_first_message()):
        loss.backward()


def test_inputs_that_require_grad_let_the_reentrant_block_train() -> None:
    hidden, block = _frozen_embedding_and_trainable_block()
    hidden.requires_grad_(True)  # what enable_input_require_grads' forward hook does to the embeddings' output
    checkpoint(block, hidden, use_reentrant=True).sum().backward()
    assert block.weight.grad is not None


def test_non_reentrant_checkpointing_needs_no_input_that_requires_grad() -> None:
    hidden, block = _frozen_embedding_and_trainable_block()
    checkpoint(block, hidden, use_reentrant=False).sum().backward()
    assert block.weight.grad is not None


def test_with_a_trainable_head_the_reentrant_block_silently_gets_no_gradient() -> None:
    hidden, block = _frozen_embedding_and_trainable_block()
    head = torch.nn.Linear(4, 1)
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        out = checkpoint(block, hidden, use_reentrant=True)
    head(out).sum().backward()  # no error: the head reaches the loss
    assert head.weight.grad is not None and block.weight.grad is None


def test_setting_requires_grad_on_the_loss_hides_the_error_and_trains_nothing() -> None:
    layer = torch.nn.Linear(4, 1).requires_grad_(False)
    loss = layer(torch.randn(3, 4)).sum()
    loss.requires_grad_(True)
    loss.backward()
    assert layer.weight.grad is None
