"""The commands of a check across several nodes: one per node (torchrun's static rendezvous, ``--node-rank``) and
one ``srun`` line (c10d rendezvous on the allocation's first node). traindoc starts nothing on other nodes: it
prints what to run there. Every value is shell-quoted."""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from checks.run import WORKER, Plan, worker_args
from checks.variables import Setting

DEFAULT_PORT = 29511  # not torchrun's 29500 nor c10d's 29400: a job running there is left alone


def _prefix(settings: Mapping[str, Setting]) -> str:
    return "".join(f"{name}={shlex.quote(s.value)} " for name, s in sorted(settings.items()))


def _progress_dir(plan: Plan) -> str:
    return f"/tmp/traindoc-check-{plan.run_id}"


def per_node(plan: Plan, nodes: int, master: str, port: int, nproc: str = "gpu") -> list[str]:
    """The command for each node, node 0 first: it must be the host ``master`` names."""
    folder = _progress_dir(plan)
    lines = []
    for node in range(nodes):
        launch = [plan.python, "-m", "torch.distributed.run", f"--nnodes={nodes}", f"--node-rank={node}",
                  f"--nproc-per-node={nproc}", f"--master-addr={master}", f"--master-port={port}", "--max-restarts=0",
                  str(WORKER), *worker_args(plan, folder)]
        lines.append(f"mkdir -p {shlex.quote(folder)} && {_prefix(plan.settings)}{shlex.join(launch)}")
    return lines


def srun(plan: Plan, nodes: int, port: int, nproc: str = "gpu") -> str:
    """One line for Slurm: a task per node, the rendezvous on the allocation's first node."""
    folder = _progress_dir(plan)
    launch = [plan.python, "-m", "torch.distributed.run", "--nnodes=$SLURM_NNODES", f"--nproc-per-node={nproc}",
              "--rdzv-backend=c10d", f"--rdzv-id=traindoc-check-{plan.run_id}", "--max-restarts=0"]
    endpoint = f'--rdzv-endpoint="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)":{port}'
    inner = (f"mkdir -p {shlex.quote(folder)} && exec env {_prefix(plan.settings)}"
             f"{shlex.join(launch[:3])} --nnodes=\"$SLURM_NNODES\" {shlex.join(launch[4:])} {endpoint} "
             f"{shlex.join([str(WORKER), *worker_args(plan, folder)])}")
    return f"srun --nodes={nodes} --ntasks-per-node=1 bash -c {shlex.quote(inner)}"
