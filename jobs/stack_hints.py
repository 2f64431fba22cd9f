"""What would tell more about a hung job: the English hints jobs.stacks gives (jobs.hang_wording holds their
Chinese)."""

from __future__ import annotations

FR_HINT = ("Flight Recorder traces of every rank name the first collective where ranks diverge: rerun with "
           "TORCH_FR_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 TORCH_FR_DUMP_TEMP_FILE=$PWD/fr/nccl_trace_rank_, "
           "then `traindoc hang --fr-dir fr/`")
NCCL_HINT = "NCCL_DEBUG=INFO (NCCL_DEBUG_SUBSYS=INIT,NET) shows which transport and which peer a rank waits on"
DETAIL_HINT = ("TORCH_DISTRIBUTED_DEBUG=DETAIL checks that every rank calls the same collective with the same shapes, "
               "and names the first rank that does not")
NATIVE_HINT = "`traindoc hang --native` shows the C++/CUDA frames under the Python ones (inside NCCL, or a CUDA sync)"
NODES_HINT = ("the ranks on the other nodes: start torch.distributed.debug.start_debug_server() in the job and run "
              "`traindoc hang --debug-server http://RANK0_HOST:25999`, or run `traindoc hang` on each node")


RENDEZVOUS_EVIDENCE = [
    "whether every node started its launcher with the same --nnodes, --nproc-per-node and rendezvous endpoint "
    "(MASTER_ADDR:MASTER_PORT or --rdzv-endpoint)",
    "whether the rendezvous endpoint is reachable from every node: `traindoc probe --port MASTER_PORT` on each",
]
