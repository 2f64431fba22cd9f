"""Remembered incidents: a failure this cluster saw before, what fixed it then, recognised when it comes back.

When a user marks an answer as what fixed their job (the web's 👍 with an optional note, Slack's :+1: and its
note field, `traindoc feedback fixed`), the answer's failure is kept as a resolved incident (``model.Incident``):
its identifying messages, normalised so that the same failure matches again on another rank, host, port or
time (``signature``), its kind, the hosts and GPUs it named, the fix that worked, the date. A later answer whose
failure matches one (``match``) says so first, beside the runbook, never instead of the new job's evidence
(``recall``: the one call ``ask()`` makes). Incidents live in ``incidents.jsonl`` beside the feedback store,
masked, mode 0600 (``store``); an exported file placed in a team corpus folder (``TRAINDOC_CORPUS``) is matched
too. With no incident file anywhere, an answer loads nothing from here but the signature of its failure.
"""
