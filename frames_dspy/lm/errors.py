"""Two kinds of LM failure, each with a message that says what happened and how to fix it.

- :class:`LMSetupError`: the LM cannot run as configured (no key, rejected credentials, an
  unknown model, no billing). Every question would fail the same way, so a run stops at once.
- :class:`LMCallError`: one call failed (a timeout, a dropped connection, a rate limit or a
  server error that outlived its retries). A run records it as that question's error and goes
  on; the run's table counts it.

DSPy reports a failed call as one of its ``LMError`` subclasses; :func:`classify` maps them.
"""

from __future__ import annotations

from typing import Any

from dspy.utils.exceptions import (
    LMAuthError,
    LMBillingError,
    LMError,
    LMNotConfiguredError,
    LMRateLimitError,
    LMServerError,
    LMTimeoutError,
    LMTransportError,
    LMUnsupportedModelError,
)

__all__ = ["LMSetupError", "LMCallError", "RETRYABLE", "classify"]


class LMSetupError(RuntimeError):
    """The LM cannot run as configured; the message says what happened and how to fix it."""


class LMCallError(RuntimeError):
    """One LM call failed after its retries; the question is recorded as failed.

    Attributes:
        attempts: How many times the call was tried.
    """

    def __init__(self, message: str, *, attempts: int = 1):
        super().__init__(message)
        self.attempts = attempts


#: Faults worth another try: they are about this moment, not about the set-up.
RETRYABLE = (LMRateLimitError, LMServerError, LMTransportError, LMTimeoutError)


#: Said after the environment variable a missing or refused key names: the command lines
#: have no key option, so a key given in code is the only other way.
KEY_FROM_PYTHON = "from Python, make_lm(..., api_key=...) also takes one"


def _target(lm: Any) -> str:
    api_base = lm.kwargs.get("api_base")
    return f"the server at {api_base}" if api_base else f"the {lm.model.split('/')[0]} API"


def classify(lm: Any, exc: LMError, *, attempts: int = 1) -> LMSetupError | LMCallError | None:
    """The error a DSPy LM error stands for, or None to re-raise it as it is.

    Args:
        lm: The ``dspy.LM`` whose call failed.
        exc: The error DSPy raised.
        attempts: How many times the call was tried (for the message).

    Returns:
        An :class:`LMSetupError` (stop the run), an :class:`LMCallError` (record and go on),
        or None (anything else, e.g. a prompt over the context window: a question's error).
    """
    cause = exc.__cause__
    if isinstance(cause, LMSetupError | LMCallError):
        return cause
    target = _target(lm)
    tries = f" (tried {attempts} times)" if attempts > 1 else ""
    if isinstance(exc, LMAuthError | LMNotConfiguredError):
        keys = getattr(exc, "env_keys", None) or ()
        where = (
            f"check {' or '.join(keys)} in the environment"
            if keys
            else "check the provider's API-key environment variable"
        ) + f" ({KEY_FROM_PYTHON})"
        return LMSetupError(f"{target} rejected the credentials for {lm.model!r} ({exc}); {where}")
    if isinstance(exc, LMBillingError):
        return LMSetupError(f"{target} refused {lm.model!r} for billing reasons ({exc})")
    if isinstance(exc, LMUnsupportedModelError):
        return LMSetupError(
            f"{target} does not serve {lm.model!r} ({exc}); check the model name (--model)"
        )
    if isinstance(exc, LMTimeoutError):
        # Asked through an attribute, not isinstance(LlamaCppEngine): the engine module imports
        # this one, so importing it back would make a cycle.
        engine = getattr(lm, "engine", None)
        if getattr(engine, "embedded", False):
            return LMCallError(
                f"a call to the embedded model {lm.model!r} was stopped after "
                f"{engine.timeout:g} s (timeout=); pass a larger timeout= to make_lm "
                "(--lm-timeout), lower max_tokens, or shorten the prompt",
                attempts=attempts,
            )
        timeout = lm.kwargs.get("timeout")
        after = f" after {timeout:g} s" if isinstance(timeout, int | float) else ""
        return LMCallError(
            f"a call to {lm.model!r} timed out{after}{tries} ({exc}); pass a larger timeout "
            f"(--lm-timeout), lower max_tokens, or check that {target} is not overloaded",
            attempts=attempts,
        )
    if isinstance(exc, LMTransportError):
        return LMCallError(
            f"could not reach {target} for {lm.model!r}{tries} ({exc}); check that the server "
            "is up and api_base is right",
            attempts=attempts,
        )
    if isinstance(exc, LMRateLimitError | LMServerError):
        kind = "rate-limited" if isinstance(exc, LMRateLimitError) else "failed"
        return LMCallError(
            f"{target} {kind} a call to {lm.model!r}{tries} ({exc})", attempts=attempts
        )
    return None
