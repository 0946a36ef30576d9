"""Serving the app with uvicorn on a socket this module binds (so port 0 picks a free port)."""

from __future__ import annotations

import ipaddress
import socket
import sys
from collections.abc import Callable

import uvicorn

from ownloop.ui._app import UiApp, address

__all__ = ["bind", "is_loopback", "serve"]


def is_loopback(host: str) -> bool:
    """Return whether ``host`` names this machine only (``127.0.0.1``, ``::1``, ``localhost``).

    Args:
        host: A host name or address.
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """Open a listening TCP socket.

    Args:
        host: The address to bind.
        port: The port; 0 for any free one.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


async def serve(
    app: UiApp,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    on_ready: Callable[[str], None] = print,
    server_holder: list[uvicorn.Server] | None = None,
) -> None:
    """Serve the app until interrupted (Ctrl-C) or ``server.should_exit`` is set.

    Args:
        app: The app.
        host: Where to listen; this machine only by default.
        port: The port; 0 picks a free one.
        on_ready: Receives the address to open (with the access token) once listening.
        server_holder: If given, the uvicorn server is appended (to stop it from elsewhere).
    """
    sock = bind(host, port)
    bound_port = sock.getsockname()[1]
    # Live pages hold an event stream open: give them a moment, not forever, when stopping.
    config = uvicorn.Config(
        app.asgi,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)
    if server_holder is not None:
        server_holder.append(server)
    on_ready(address(app, host, bound_port))
    sse = sys.modules.get("sse_starlette.sse")
    exiting = sse.AppStatus.should_exit if sse is not None else False
    try:
        await server.serve(sockets=[sock])
    finally:
        sock.close()
        # sse_starlette (the `mcp` SDK's SSE), once imported, patches uvicorn's signal handler to
        # set its process-wide `AppStatus.should_exit`, which nothing resets: after a Ctrl-C here,
        # every SSE response later served in this process (an MCP server's) would end at once.
        if sse is not None:
            sse.AppStatus.should_exit = exiting
