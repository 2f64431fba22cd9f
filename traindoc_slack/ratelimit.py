"""Slack's rate limits honoured: a Web API call answered HTTP 429 is tried again after the ``Retry-After`` it names,
a bounded number of times, each wait bounded too, so an answer already computed is not lost to a busy moment and a
long limit never holds a worker for an hour (the call then fails as ``ratelimited``, one log line)."""

from __future__ import annotations

import logging

from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState

log = logging.getLogger("traindoc.slack")
RETRIES = 3  # tries after the first
MAX_WAIT_S = 30.0  # the longest single wait; a longer Retry-After gives up at once
DEFAULT_WAIT_S = 1.0  # a 429 without Retry-After (Slack always sends one)


def retry_after(response: HttpResponse) -> float:
    """The seconds Slack asked to wait (its ``Retry-After`` header), else ``DEFAULT_WAIT_S``."""
    for name, values in response.headers.items():
        if name.lower() == "retry-after":
            value = values[0] if isinstance(values, list) and values else values
            try:
                return max(0.0, float(str(value).strip()))
            except ValueError:
                break
    return DEFAULT_WAIT_S


class RetryAfter(RateLimitErrorRetryHandler):
    """slack_sdk's own 429 handler (it waits what ``Retry-After`` says), bounded: ``RETRIES`` times, and not at all where
    Slack asks for more than ``MAX_WAIT_S``."""

    def __init__(self, retries: int = RETRIES, max_wait_s: float = MAX_WAIT_S) -> None:
        super().__init__(max_retry_count=retries)
        self.max_wait_s = max_wait_s

    def _can_retry(self, *, state: RetryState, request: HttpRequest, response: HttpResponse | None = None,
                   error: Exception | None = None) -> bool:
        return (super()._can_retry(state=state, request=request, response=response, error=error)
                and response is not None and retry_after(response) <= self.max_wait_s)

    def prepare_for_next_attempt(self, *, state: RetryState, request: HttpRequest, response: HttpResponse | None = None,
                                 error: Exception | None = None) -> None:
        log.info("slack: rate-limited; trying again in %g s (Retry-After)",
                 retry_after(response) if response is not None else DEFAULT_WAIT_S)
        super().prepare_for_next_attempt(state=state, request=request, response=response, error=error)
