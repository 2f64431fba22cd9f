"""What would tell more about a hung job: the hints jobs.stacks and jobs.hang give, as phrase keys
(``common/data/phrases/hang.json``), and their English (what a diagnosis's ``next_evidence`` holds)."""

from __future__ import annotations

from common.language import say

FR = "hang.hint.fr"
NCCL = "hang.hint.nccl"
DETAIL = "hang.hint.detail"
NATIVE = "hang.hint.native"
NODES = "hang.hint.nodes"
RENDEZVOUS = ["hang.hint.same_launch", "hang.hint.endpoint_reachable"]

FR_HINT = say(FR, "en")
NCCL_HINT = say(NCCL, "en")
DETAIL_HINT = say(DETAIL, "en")
NATIVE_HINT = say(NATIVE, "en")
NODES_HINT = say(NODES, "en")
RENDEZVOUS_EVIDENCE = [say(key, "en") for key in RENDEZVOUS]
