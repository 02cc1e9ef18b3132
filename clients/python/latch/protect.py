"""The ``@latch.protect`` decorator: a plain function run through latch serve, once per effect.

A protected call begins the action with the function's arguments, runs the function with the
canonical arguments the server hashed, and reports the outcome: a return is committed (its value
is the stored result), ``raise latch.NotExecuted(...)`` is not_executed (the key may be
retried), and any other exception — a timeout, a lost reply — is unknown: the effect stays
ambiguous, and retries are refused, until someone resolves it. Never "failed".
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
from typing import Any, Callable, Dict, Optional, Tuple, TypeVar

from .client import COMMITTED, NOT_EXECUTED, UNKNOWN, Client, Reservation, new_request_key
from .errors import Committed, LatchError, OutcomeUnknown, ProblemError, Refusal
from .interrupt import RESUME, Answer, Interrupter, interruptible

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
            approval_id: Optional[Callable[..., Optional[str]]] = None,
            interrupter: Optional[Interrupter] = None) -> Callable[[F], F]:
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

    ``interrupter`` (an Interrupter, such as ``latch.interrupt.Poller``) routes a refusal a
    framework can wait out (approval_required, an unknown outcome: ``interruptible``) through
    it: on ``resume`` the call runs again, unchanged and presenting nothing — the server finds
    the granted request for the exact action and spends it once — and on ``denied`` or
    ``expired`` the call raises the ApprovalRefused (approval_denied, approval_expired) the
    answer builds, the function never having run. An exception of the interrupter itself (the
    wait failed) propagates as it is.

    An ``async def`` function is wrapped as one: the requests to latch serve run in a thread
    (asyncio.to_thread), the function on the event loop.

    Raises the refusal of its kind (latch.Denied, latch.Ambiguous, …); OutcomeUnknown when the
    function raised anything but NotExecuted, or its outcome could not be reported — the
    function's own exception is its ``__cause__``."""
    if duplicate not in ("raise", "return"):
        raise ValueError("duplicate %r: want \"raise\" or \"return\"" % duplicate)

    def wrap(fn: F) -> F:
        sig = inspect.signature(fn)
        if arguments is None:
            # The action's arguments are the call's, by name: a parameter without a name to
            # pass it by could not be handed back the canonical arguments.
            for p in sig.parameters.values():
                if p.kind in (p.POSITIONAL_ONLY, p.VAR_POSITIONAL):
                    raise TypeError("latch.protect(%r) of %s: parameter %s has no name to pass it by; "
                                    "give arguments= to map the call to the action's arguments"
                                    % (action, getattr(fn, "__qualname__", fn), p))

        def begin(args: tuple, kwargs: dict) -> Tuple[Optional[Reservation], Any]:
            """begin begins the call: (the reservation, None), or (None, the stored result) of
            a committed duplicate the caller asked to have returned."""
            if arguments is not None:
                args_json = arguments(*args, **kwargs)
            else:
                bound = sig.bind(*args, **kwargs)
                bound.apply_defaults()
                args_json = {}
                for name, value in bound.arguments.items():
                    if sig.parameters[name].kind is inspect.Parameter.VAR_KEYWORD:
                        args_json.update(value)  # **kwargs: each is an argument of its own
                    else:
                        args_json[name] = value
            apr = approval_id(*args, **kwargs) if approval_id is not None else None
            key = new_request_key()
            try:
                if wait > 0 and not apr:
                    return client.wait_for_approval(action, args_json, timeout=wait, request_key=key), None
                return client.begin(action, args_json, approval_id=apr, request_key=key), None
            except Committed as dup:
                if duplicate == "return":
                    return None, dup.result
                raise

        def call_args(r: Reservation, args: tuple, kwargs: dict) -> Tuple[tuple, dict]:
            # The function acts on the canonical arguments the server hashed, unless the
            # action's arguments were mapped from the call's.
            return (args, kwargs) if arguments is not None else ((), dict(r.arguments))

        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def aprotected(*args: Any, **kwargs: Any) -> Any:
                r, stored = await asyncio.to_thread(begin, args, kwargs)
                if r is None:
                    return stored
                a, kw = call_args(r, args, kwargs)
                token = _CURRENT.set(r)
                try:
                    out = await fn(*a, **kw)
                except BaseException as err:
                    _CURRENT.reset(token)
                    await asyncio.to_thread(_report_error, client, r, err)
                    raise  # _report_error raised what to raise; unreachable
                _CURRENT.reset(token)
                return await asyncio.to_thread(_report_result, client, r, out)

            if interrupter is None:
                return aprotected  # type: ignore[return-value]

            @functools.wraps(fn)
            async def ainterrupted(*args: Any, **kwargs: Any) -> Any:
                while True:
                    try:
                        return await aprotected(*args, **kwargs)
                    except Refusal as err:
                        if not interruptible(err):
                            raise
                        _stop_unless_resume(await asyncio.to_thread(interrupter.interrupt, err), err)

            return ainterrupted  # type: ignore[return-value]

        @functools.wraps(fn)
        def protected(*args: Any, **kwargs: Any) -> Any:
            r, stored = begin(args, kwargs)
            if r is None:
                return stored
            a, kw = call_args(r, args, kwargs)
            token = _CURRENT.set(r)
            try:
                out = fn(*a, **kw)
            except BaseException as err:
                _CURRENT.reset(token)
                _report_error(client, r, err)
                raise  # _report_error raised what to raise; unreachable
            _CURRENT.reset(token)
            return _report_result(client, r, out)

        if interrupter is None:
            return protected  # type: ignore[return-value]

        @functools.wraps(fn)
        def interrupted(*args: Any, **kwargs: Any) -> Any:
            while True:  # each round waits on a person or a resolution
                try:
                    return protected(*args, **kwargs)
                except Refusal as err:
                    if not interruptible(err):
                        raise
                    _stop_unless_resume(interrupter.interrupt(err), err)

        return interrupted  # type: ignore[return-value]

    return wrap


def _stop_unless_resume(ans: Answer, err: Refusal) -> None:
    """_stop_unless_resume returns on a resume answer and raises what the call stops with on
    any other: the answer's ApprovalRefused, or a TypeError for an answer no Interrupter ends
    with."""
    if getattr(ans, "status", None) == RESUME:
        return
    refused = ans.refusal() if isinstance(ans, Answer) else None
    if refused is None:
        raise TypeError("latch.protect: the interrupter answered %r; want resume, denied or expired" % (ans,)) from err
    raise refused from err


# The longest error text sent with an outcome: it is kept on the receipt.
_ERROR_TEXT_MAX = 2048


def _error_text(err: BaseException) -> str:
    text = "%s: %s" % (type(err).__name__, err) if str(err) else type(err).__name__
    return text[:_ERROR_TEXT_MAX]


def _report_error(client: Client, r: Reservation, err: BaseException) -> None:
    """_report_error reports a function that raised, and raises what the call raises:
    NotExecuted is reported not_executed and raised as it is; anything else — including
    KeyboardInterrupt — is reported unknown (it may have acted) and raised as OutcomeUnknown
    (KeyboardInterrupt and SystemExit are left to propagate)."""
    if isinstance(err, NotExecuted):
        try:
            client.complete(r.action_id, NOT_EXECUTED, error=_error_text(err))
        except LatchError as ferr:
            raise _unknown(r, "not_executed could not be recorded: %s" % ferr) from err
        raise err
    try:
        client.complete(r.action_id, UNKNOWN, error=_error_text(err))
    except LatchError:
        pass  # unreported, the lease lapses into ambiguous: the same outcome
    if not isinstance(err, Exception):
        raise err
    raise _unknown(r, _error_text(err)) from err


def _report_result(client: Client, r: Reservation, out: Any) -> Any:
    """_report_result reports a function that returned: committed, with its value as the stored
    result. A value latch cannot store (not JSON, a float, an integer past 2^53) is recorded
    committed without a result — the effect happened and a duplicate must still be refused —
    and raised as a TypeError naming why."""
    why = _unstorable(out)
    try:
        if why:
            client.complete(r.action_id, COMMITTED, None, "the result could not be stored: " + why)
            raise TypeError("result of %s cannot be stored by latch: %s (recorded committed without it)" % (r.action, why))
        try:
            rec = client.complete(r.action_id, COMMITTED, out)
        except ProblemError as err:
            if err.reason != "invalid_field" or err.field != "result":
                raise
            client.complete(r.action_id, COMMITTED, None, "the result could not be stored: " + err.detail)
            raise TypeError("result of %s cannot be stored by latch: %s (recorded committed without it)"
                            % (r.action, err.detail)) from err
    except LatchError as err:
        raise _unknown(r, "committed could not be recorded: %s" % err) from err
    if rec.result == "ambiguous":
        # The lease lapsed before the outcome came: the key was resolved or taken meanwhile.
        raise OutcomeUnknown("key_lost", "the lease lapsed before the outcome was recorded", 409,
                             {"effect_key": r.effect_key, "attempt": r.attempt, "state": "ambiguous",
                              "action_id": r.action_id})
    return out


def _unstorable(v: Any, at: str = "") -> str:
    """_unstorable says why v is not in latch's value model (JSON without floats, integers
    within ±2^53), or "" when it is."""
    if v is None or isinstance(v, (bool, str)):
        return ""
    if isinstance(v, int):
        return "" if -(2 ** 53) <= v <= 2 ** 53 else "integer beyond ±2^53 at %s" % (at or "/")
    if isinstance(v, float):
        return "a float at %s (use integers: minor units, or a decimal string)" % (at or "/")
    if isinstance(v, dict):
        for k, x in v.items():
            if not isinstance(k, str):
                return "a non-string key %r at %s" % (k, at or "/")
            why = _unstorable(x, at + "/" + k.replace("~", "~0").replace("/", "~1"))
            if why:
                return why
        return ""
    if isinstance(v, (list, tuple)):
        for i, x in enumerate(v):
            why = _unstorable(x, "%s/%d" % (at, i))
            if why:
                return why
        return ""
    return "a %s at %s is not JSON" % (type(v).__name__, at or "/")


def _unknown(r: Reservation, detail: str) -> OutcomeUnknown:
    return OutcomeUnknown("outcome_unknown", detail, 0,
                          {"effect_key": r.effect_key, "attempt": r.attempt, "action_id": r.action_id})
