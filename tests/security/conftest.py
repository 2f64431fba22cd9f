"""The adversarial suite: hostile and broken input never leaks a secret, hangs, or shows more than one line.

Hypothesis runs without its example database (nothing is written into the checkout) and with a deadline
generous enough for a shared 2-core machine; each property still tries a few hundred inputs.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile("traindoc", database=None, deadline=2000, max_examples=200,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("traindoc")
