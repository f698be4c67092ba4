"""Jobs replayed as the attempts they ran: an earlier attempt of known length, then the rest after a re-queue.

A job set whose duration spans all of a job's attempts (RFold: last end - first
start) replays each job as one attempt, so the replay has no re-queue gap. The
full trace's queueing-delay figure counts every attempt's wait, the gaps before
retries included. :class:`PlannedRetries` splits chosen jobs in two: the first
attempt ends (as a failure) after ``first_attempt_s`` of running, the job queues
again at once and runs the rest of its work (progress kept). It plugs into the
simulator's failure machinery (``failures=PlannedRetries(...)``,
``retry=PLANNED_RETRY``); which jobs and how long is the caller's
(:func:`dlcluster.validation.ingredients.planned_first_attempts`).
"""

from __future__ import annotations

import numpy as np

from .failures import FailureClass, FailureDraws, RetryPolicy

#: One retry, progress kept: the second attempt runs the work the first did not do.
PLANNED_RETRY = RetryPolicy(max_retries=1, retry_non_retryable=True, keep_progress=True)


class PlannedRetries:
    """A failure model in which job ``j`` fails once, ``first_attempt_s[j]`` after it first starts (NaN: never)."""

    classes = (FailureClass("earlier attempt (planned)", "infrastructure", 0.0, {"dist": "exponential", "mean_s": 1.0},
                            retryable=True, repeat_probability=0.0),)

    def __init__(self, first_attempt_s):
        self.first_attempt_s = np.asarray(first_attempt_s, dtype=float)
        if (self.first_attempt_s <= 0).any():
            raise ValueError("planned retries: a first attempt must last longer than 0 s")

    def draws(self, num_jobs: int, max_failures: int, seed: int, given=None) -> FailureDraws:
        if len(self.first_attempt_s) != num_jobs:
            raise ValueError(f"planned retries: {len(self.first_attempt_s)} first attempts for {num_jobs} jobs")
        planned = np.isfinite(self.first_attempt_s)
        rtf = np.full((num_jobs, max_failures), np.inf)
        rtf[:, 0] = np.where(planned, self.first_attempt_s, np.inf)
        # repeat draws of 1 never fall below the repeat probability (0): the retry is never hit again
        return FailureDraws(job_class=np.where(planned, 0, -1).astype(np.int64), rtf_s=rtf,
                            repeat_u=np.ones((num_jobs, max_failures)))
