"""Jobs, ranks and timelines: a distributed job read as a whole.

The log triage (which rank failed first, which errors are only consequences) and the live hang
snapshot (what every rank is doing now) both produce a ``jobs.diagnosis.JobDiagnosis``."""
