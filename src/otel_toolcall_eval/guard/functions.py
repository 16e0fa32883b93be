"""The guard around a plain Python tool function, sync or async: ``@guarded(guard)``.

The call's arguments are bound to the function's signature (positional ones by name, defaults left out, as the
model would send them); the tool's schema is the configured one, else derived from the type hints as agent
frameworks derive it. A stopped call raises ``ToolCallBlocked`` (its text is the message for the agent: frameworks
send a tool's exception text back to the model) or, with ``on_block="return"``, returns that message instead.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, Literal, TypeVar, cast

from otel_toolcall_eval.config import schema_from_function
from otel_toolcall_eval.guard.guard import Guard, ToolCallBlocked, definitions

F = TypeVar("F", bound=Callable[..., Any])
_SKIPPED = ("self", "cls", "ctx", "context")  # a framework's run context is not a model argument


def guarded(
    guard: Guard,
    *,
    name: str | None = None,
    scope: str | None = None,
    on_block: Literal["raise", "return"] = "raise",
) -> Callable[[F], F]:
    """Decorate a tool function so the guard decides every call before it runs; ``name`` defaults to the
    function's name, ``scope`` to the current ``Guard.scope`` or trace."""

    def decorate(func: F) -> F:
        tool = name or func.__name__
        signature = inspect.signature(func)
        offered = None
        if tool not in guard.policy.tools:
            try:
                offered = definitions({tool: schema_from_function(func)})
            except Exception:  # noqa: BLE001 - hints pydantic cannot make a schema of: the config's, or none
                offered = None

        def arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
            bound = signature.bind_partial(*args, **kwargs).arguments
            out: dict[str, Any] = {}
            for key, value in bound.items():
                kind = signature.parameters[key].kind
                if key in _SKIPPED:
                    continue
                if kind is inspect.Parameter.VAR_KEYWORD:
                    out.update(value)
                elif kind is not inspect.Parameter.VAR_POSITIONAL:
                    out[key] = value
            return out

        def stopped(error: ToolCallBlocked) -> Any:
            if on_block == "return":
                return str(error)
            raise error

        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                try:
                    return await guard.run_async(tool, arguments(args, kwargs), lambda: func(*args, **kwargs),
                                                 scope=scope, tools=offered)  # fmt: skip
                except ToolCallBlocked as error:
                    return stopped(error)

            return cast(F, run_async)

        @functools.wraps(func)
        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return guard.run(tool, arguments(args, kwargs), lambda: func(*args, **kwargs), scope=scope,
                                 tools=offered)  # fmt: skip
            except ToolCallBlocked as error:
                return stopped(error)

        return cast(F, run)

    return decorate
