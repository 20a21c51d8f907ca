"""The OpenAI SDK's retry waits become lines in the run's trace — only while the run still
waits for that request."""

from __future__ import annotations

import logging
import time

from sleuth.llm import calls
from sleuth.llm.retry_notice import SDK_LOGGER, retry_notices


def _sdk_retry_log() -> None:
    logging.getLogger(SDK_LOGGER).info("Retrying request in %f seconds (retry %d of %d)", 0.4, 1, 2)


def test_a_retry_wait_is_told_to_the_run() -> None:
    lines: list[str] = []
    with (
        calls.run_limits(calls.RunLimits(deadline=time.monotonic() + 30)),
        retry_notices(lines.append),
    ):
        _sdk_retry_log()
    assert len(lines) == 1 and "retrying in 400 ms (retry 1 of 2)" in lines[0]


def test_a_request_the_run_gave_up_at_its_deadline_says_nothing_of_its_retries() -> None:
    # once: "the run stops there" was followed by "retrying in 406 ms" from the abandoned
    # request's thread, which carries the run's context
    lines: list[str] = []
    with calls.run_limits(calls.RunLimits(cut=True)), retry_notices(lines.append):
        _sdk_retry_log()
    assert lines == []
