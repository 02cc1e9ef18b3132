"""The ``@latch.protect`` decorator: a plain function run through latch serve, once per effect.

A protected call begins the action with the function's arguments, runs the function with the
canonical arguments the server hashed, and reports the outcome: a return is committed (its value
is the stored result), ``raise latch.NotExecuted(...)`` is not_executed (the key may be
retried), and any other exception — a timeout, a lost reply — is unknown: the effect stays
ambiguous, and retries are refused, until someone resolves it. Never "failed".
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import json
from typing import Any, Callable, Dict, Optional, TypeVar

from .client import COMMITTED, NOT_EXECUTED, UNKNOWN, Client, LostAnswer, Reservation, new_request_key
from .errors import Committed, LatchError, OutcomeUnknown

F = TypeVar("F", bound=Callable[..., Any])

_CURRENT: contextvars.ContextVar[Optional[Reservation]] = contextvars.ContextVar("latch_reservation", default=None)


class NotExecuted(Exception):
    """NotExecuted is what a protected function raises when it knows nothing happened (a card
    declined before any charge): the outcome is reported not_executed and the effect key may be
    retried. Raise it ``from`` the cause."""


def current() -> Optional[Reservation]:
    """current is the reservation of the protected call running in this thread or task, or
    None outside one: pass ``current().idempotency_token`` (or ``effect_token``) to the remote
    system as its idempotency key."""
    return _CURRENT.get()


def protect(action: str, *, client: Client, wait: float = 0, duplicate: str = "raise",
            arguments: Optional[Callable[..., Dict[str, Any]]] = None,
            approval_id: Optional[Callable[..., Optional[str]]] = None) -> Callable[[F], F]:
    """protect wraps a function so each call runs through latch serve as ``action``.

    The call's arguments, bound to the function's parameters by name, are the action's
    arguments (``arguments``, when given, maps the call's arguments to them instead, and the
    function is then called as it was). The function runs only on a ``reserved`` or ``allowed``
    begin, with the canonical arguments the server returned; its return value must be JSON
    (integers, no floats) and is stored as the result handed to later duplicates.

    ``wait`` (seconds) waits that long for a person's answer when approval is required, asking
    the server round after round with one request key; 0 raises ApprovalRequired at once, with
    the request's ``approval_id``. ``duplicate="return"`` returns a committed duplicate's stored
    result instead of raising Committed. ``approval_id``, when given, is asked for an approval
    to present for the call (a callable of the call's arguments).

    Raises the refusal of its kind (latch.Denied, latch.Ambiguous, …); OutcomeUnknown when the
    function raised anything but NotExecuted, or its outcome could not be reported — the
    function's own exception is its ``__cause__``."""
    if duplicate not in ("raise", "return"):
        raise ValueError("duplicate %r: want \"raise\" or \"return\"" % duplicate)

    def wrap(fn: F) -> F:
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def protected(*args: Any, **kwargs: Any) -> Any:
            if arguments is not None:
                args_json = arguments(*args, **kwargs)
            else:
                bound = sig.bind(*args, **kwargs)
                bound.apply_defaults()
                args_json = dict(bound.arguments)
            apr = approval_id(*args, **kwargs) if approval_id is not None else None
            key = new_request_key()
            try:
                if wait > 0 and not apr:
                    r = client.wait_for_approval(action, args_json, timeout=wait, request_key=key)
                else:
                    r = client.begin(action, args_json, approval_id=apr, request_key=key)
            except Committed as dup:
                if duplicate == "return":
                    return dup.result
                raise
            if arguments is not None:
                call = functools.partial(fn, *args, **kwargs)
            else:
                call = functools.partial(fn, **r.arguments)
            return _run(client, r, call)

        return protected  # type: ignore[return-value]

    return wrap


def _run(client: Client, r: Reservation, call: Callable[[], Any]) -> Any:
    """_run runs the function under the reservation and reports its outcome. An exception that
    is not NotExecuted — including KeyboardInterrupt — is reported unknown and raised as
    OutcomeUnknown: it may have acted."""
    token = _CURRENT.set(r)
    try:
        out = call()
    except NotExecuted as err:
        try:
            client.complete(r.action_id, NOT_EXECUTED, error=str(err) or type(err).__name__)
        except LatchError as ferr:
            raise _unknown(r, "not_executed could not be recorded: %s" % ferr) from err
        raise
    except BaseException as err:
        try:
            client.complete(r.action_id, UNKNOWN, error="%s: %s" % (type(err).__name__, err))
        except LatchError:
            pass  # unreported, the lease lapses into ambiguous: the same outcome
        if not isinstance(err, Exception):
            raise  # KeyboardInterrupt, SystemExit: reported unknown, and left to propagate
        raise _unknown(r, "%s: %s" % (type(err).__name__, err)) from err
    finally:
        _CURRENT.reset(token)
    try:
        json.dumps(out, allow_nan=False)
    except (TypeError, ValueError) as err:
        # It acted, but its result cannot be stored: record it committed with no result, so a
        # duplicate is still refused, and say why.
        client.complete(r.action_id, COMMITTED, None, "result not JSON: %s" % err)
        raise TypeError("result of %s is not JSON: %s" % (r.action, err)) from err
    try:
        rec = client.complete(r.action_id, COMMITTED, out)
    except (LatchError, LostAnswer) as err:
        raise _unknown(r, "committed could not be recorded: %s" % err) from err
    if rec.result == "ambiguous":
        # The lease lapsed before the outcome came: the key was resolved or taken meanwhile.
        raise OutcomeUnknown("key_lost", "the lease lapsed before the outcome was recorded", 409,
                             {"effect_key": r.effect_key, "attempt": r.attempt, "state": "ambiguous",
                              "action_id": r.action_id})
    return out


def _unknown(r: Reservation, detail: str) -> OutcomeUnknown:
    return OutcomeUnknown("outcome_unknown", detail, 0,
                          {"effect_key": r.effect_key, "attempt": r.attempt, "action_id": r.action_id})
