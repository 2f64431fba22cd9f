"""Exit 0 when a Triton kernel compiles and runs here (illegal_access.py needs it), else print why and exit 1."""

import torch
import triton
import triton.language as tl


@triton.jit
def copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


x = torch.arange(10, device="cuda", dtype=torch.float32)
out = torch.empty_like(x)
copy[(1,)](x, out, 10, BLOCK=16)
assert torch.equal(x, out)
print("triton", triton.__version__, "ok")
