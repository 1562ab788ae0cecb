"""Helpers the broker's processors and services share.

* :func:`wait_completable` awaits the store's CompletableFuture (a put that waits for a flush or a
  slave) on the node's event loop;
* :func:`delete_property` is ``MessageUtils.deleteProperty``;
* :func:`answer_held_request` runs a long-polling request again when it is woken (pull and pop).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from typing import Any
from collections.abc import Callable

from rmqlab.common.future import CompletableFuture
from rmqlab.common.message.message_decoder import NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR

log = logging.getLogger("rmqlab.broker")


async def wait_completable(future: CompletableFuture) -> Any:
    """Await the store's CompletableFuture on the node's loop."""
    if future.done():
        return future.result()
    waiter = asyncio.get_running_loop().create_future()
    future.then_accept(lambda value: waiter.done() or waiter.set_result(value))
    return await waiter


def delete_property(properties: str | None, name: str) -> str | None:
    """``MessageUtils.deleteProperty``: drop every ``name\\x01value\\x02`` entry, keep the rest as is."""
    if properties is None or name not in properties:
        return properties
    out: list[str] = []
    pos = 0
    while pos < len(properties):
        end = properties.find(PROPERTY_SEPARATOR, pos)
        entry_end = len(properties) if end < 0 else end + 1
        entry = properties[pos:entry_end]
        if not entry.startswith(name + NAME_VALUE_SEPARATOR):
            out.append(entry)
        elif end < 0:
            break  # Java drops an unterminated last entry of that name and everything after it
        pos = entry_end
    return "".join(out)


def answer_held_request(broker, channel, request, process: Callable[[], Any], task_name: str) -> None:
    """``executeRequestWhenWakeup``: on a task of the broker's node, run `process()` (the request's
    processing again; it may return an awaitable) and write its response, if any, to `channel`."""
    async def run() -> None:
        try:
            response = process()
            if inspect.isawaitable(response):
                response = await response
            if response is not None:
                response.version = broker.remoting_version
                await channel.write_response(request, response)
        except Exception:
            log.exception("executeRequestWhenWakeup run failed: %r", request)

    broker.node.spawn(run(), name=task_name)
