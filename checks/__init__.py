"""`traindoc check`: the one part of traindoc that starts processes, and only when the user asks.

``check nccl`` starts one short job through torchrun (``checks.run``) whose ranks run the collectives of
``checks.collectives`` with the job's communication settings (``checks.variables``), and reads what it did
(``checks.report``) in the registry's terms (``checks.meaning``); ``check p2p`` reads the GPUs' peer access
(``checks.p2p``); ``checks.commands`` writes the command for each node of a multi-node check.
"""
