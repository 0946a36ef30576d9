"""Running a synchronous callable so that the event loop can stop waiting for it.

A thread cannot be stopped. `call_in_thread` runs the callable in a daemon thread of its own, not
in the event loop's default executor: when the awaiting task is cancelled (a timeout, the run's
deadline) the caller stops waiting at once, and the thread is *abandoned* — it runs to its end in
the background, its result is dropped, and ``asyncio.run`` does not wait for it when it shuts
down (it joins the default executor's threads, never these).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["call_in_thread"]


async def call_in_thread(function: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
    """Call ``function(*args, **kwargs)`` in a daemon thread and await its result.

    The caller's context variables are copied into the thread, as ``asyncio.to_thread`` does.
    Cancelling the await abandons the thread (see the module docstring).

    Args:
        function: The synchronous callable.
        *args: Its positional arguments.
        **kwargs: Its keyword arguments.

    Returns:
        What the callable returned.

    Raises:
        Exception: Whatever the callable raised.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(error: BaseException | None, value: Any) -> None:
        if future.done():  # the caller stopped waiting: the outcome is dropped
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def work() -> None:
        error: BaseException | None = None
        value: Any = None
        try:
            value = context.run(function, *args, **kwargs)
        except BaseException as raised:  # delivered to the awaiting task, not lost in the thread
            error = raised
        # RuntimeError: the event loop closed while the thread ran, and nobody is waiting.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, error, value)

    name = getattr(function, "__name__", "call")
    threading.Thread(target=work, name=f"ownloop-{name}", daemon=True).start()
    return await future
