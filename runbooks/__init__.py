"""traindoc's own runbooks: one failure kind per Markdown file, in English and Chinese.

The files live in ``corpus/runbooks/<lang>/<kind>.md`` (indexed and cited like any document) and follow
``runbooks/TEMPLATE.md``: YAML front matter (the kind, the triage categories it answers, the exact messages
it recognises, the versions it applies to, when it was checked, its sources), then the same headings in
every file (how to recognise it, what it means, checks, fixes in order, what not to do), every item
carrying its source. ``runbooks.catalog`` reads and checks them; ``runbooks.choose`` picks the runbook for
a diagnosed failure; ``runbooks.render`` writes its fixes into an answer.
"""
