"""Set-up errors: one exception type whose message says what went wrong and how to fix it.

DSPy reports a failed call as one of its ``LMError`` subclasses (authentication, transport,
timeout, ...). :func:`_setup_error` turns those that mean "the LM is not set up right" into an
:class:`LMSetupError` naming the model, the server or provider, and the fix.
"""

from __future__ import annotations

from typing import Any

from dspy.utils.exceptions import (
    LMAuthError,
    LMError,
    LMNotConfiguredError,
    LMTimeoutError,
    LMTransportError,
)

__all__ = ["LMSetupError"]


class LMSetupError(RuntimeError):
    """The LM cannot run as configured; the message says what happened and how to fix it."""


def _setup_error(lm: Any, exc: LMError) -> LMSetupError | None:
    """The set-up error a DSPy LM error stands for, or None if it is not a set-up problem.

    Args:
        lm: The ``dspy.LM`` whose call failed.
        exc: The error DSPy raised.

    Returns:
        An :class:`LMSetupError` to raise from ``exc``, or None to re-raise ``exc`` as it is.
    """
    cause = exc.__cause__
    if isinstance(cause, LMSetupError):
        return cause
    api_base = lm.kwargs.get("api_base")
    target = f"the server at {api_base}" if api_base else f"the {lm.model.split('/')[0]} API"
    if isinstance(exc, (LMAuthError, LMNotConfiguredError)):
        keys = getattr(exc, "env_keys", None) or ()
        where = (
            f"set {' or '.join(keys)} or pass api_key="
            if keys
            else "pass api_key= or set the provider's API-key environment variable"
        )
        return LMSetupError(f"{target} rejected the credentials for {lm.model!r} ({exc}); {where}")
    if isinstance(exc, LMTimeoutError):
        # Asked through an attribute, not isinstance(LlamaCppEngine): the engine module imports
        # this one, so importing it back would make a cycle.
        engine = getattr(lm, "engine", None)
        if getattr(engine, "embedded", False):
            return LMSetupError(
                f"a call to the embedded model {lm.model!r} was stopped after "
                f"{engine.timeout:g} s (timeout=); pass a larger timeout= to make_lm, lower "
                "max_tokens, or shorten the prompt"
            )
        timeout = lm.kwargs.get("timeout")
        after = f" after {timeout:g} s" if isinstance(timeout, int | float) else ""
        return LMSetupError(
            f"a call to {lm.model!r} timed out{after} ({exc}); pass a larger timeout= to "
            f"make_lm, lower max_tokens, or check that {target} is not overloaded"
        )
    if isinstance(exc, LMTransportError):
        return LMSetupError(
            f"could not reach {target} for {lm.model!r} ({exc}); start the server or fix api_base"
        )
    return None
