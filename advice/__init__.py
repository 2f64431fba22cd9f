"""Advice that is safe to paste: every command and name a shown section holds, checked before a user reads it.

- ``claims``: corrections of specific claims, as rows (claim, verdict, corrected form, reason, source, documents).
- ``names``: the names upstream projects define (NCCL_*, TORCH_*, torchrun and DeepSpeed flags, DeepSpeed config
  keys, vLLM engine arguments), each name an answer shows looked up: known, unknown, deprecated, or not checked.
- ``installs``: install lines that could replace the user's torch.
- ``projects``: whose advice a section is (a section written for one project's CLI).
- ``review``: the one function every surface calls on a section before showing it.
"""
