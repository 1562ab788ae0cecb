"""RemotingChannel: one remoting connection, in either direction.

RocketMQ runs both ends of a connection through ``NettyRemotingAbstract``: whichever side opened
it, each side may send requests and answer the other's. A broker answers its clients' requests on
the connections they opened and sends them requests too (NOTIFY_CONSUMER_IDS_CHANGED); the
controller answers a broker's requests and sends NOTIFY_BROKER_ROLE_CHANGED the other way. So a
channel is symmetric:

* **sending requests** - :meth:`invoke` and :meth:`invoke_async` give the request the next
  opaque of this connection and park a future under it (the channel's part of RocketMQ's
  ``responseTable``); the response with that opaque completes the future, and losing the
  connection fails every pending one with :class:`RemotingConnectError` (``failFast``). The
  timeouts are RocketMQ's: :meth:`invoke` (``invokeSyncImpl``, whose caller waits on its future
  with the timeout) arms a timer of its own and fails at ``timeout_ms`` exactly;
  :meth:`invoke_async` (``invokeAsyncImpl``) arms nothing: the owner's ``scan_response_table``,
  every second, fails it once ``begin + timeout + 1000 ms`` has passed (see
  ``RemotingAbstract``), so an async request costs no timer. :meth:`invoke_oneway` marks the
  request oneway and expects nothing back;
* **serving requests** - every incoming request is handed to the owner (the server or client the
  channel belongs to, see ``RemotingAbstract.process_request_command``) in a task of its own.
  Clients multiplex everything over one connection (the C++ client, PyPI ``rocketmq`` 0.4.4,
  does): a PULL_MESSAGE held for a long poll must not delay the requests behind it, so responses leave in completion order, each
  carrying its request's opaque.

Reading is an incremental :class:`FrameDecoder`; a :class:`FrameError` closes this connection only
(as ``NettyDecoder`` does), logged with its reason and traced as ``net.close``. Every frame is
traced as ``frame.send`` / ``frame.recv`` with ``proto="remoting"`` and the decoded header fields;
``name`` is the request code's name for a request and the response code's for a response.

Only the Node interface and the stream methods both runtimes provide are used, so the same code
runs over TCP and inside the simulator.

Writes over TCP (an ``asyncio.StreamWriter``) are coalesced: the frames a channel sends during one
event-loop iteration are handed to the transport together at the start of the next (one send
system call instead of one per frame; Netty's ``writeAndFlush`` from many threads batches the same
way in its event loop), and closing the channel first hands over what is pending. The bytes on the
wire are the same. On the simulator every write stays immediate: there is no system call to save,
and deferring it would move the write in the simulator's deterministic schedule.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rmqlab.remoting.exceptions import FrameError, RemotingCommandError, RemotingConnectError, \
    RemotingTimeoutError
from rmqlab.remoting.frame_decoder import FRAME_MAX_LENGTH, FrameDecoder
from rmqlab.remoting.remoting_command import RemotingCommand
from rmqlab.remoting.remoting_helper import clip, exception_simple_desc, peer_address
from rmqlab.remoting.response_code import RemotingSysResponseCode

if TYPE_CHECKING:
    from rmqlab.remoting.remoting_abstract import RemotingAbstract
    from rmqlab.runtime.node import Node

_READ_SIZE = 256 * 1024
_OPAQUE_MASK = 0x7FFFFFFF  # stays a non-negative Java int when the counter wraps
# scanResponseTable fails an async request once beginTimestamp + timeoutMillis + 1000 has passed.
SCAN_GRACE_MS = 1000


def _trace_emitter(node: Node) -> Callable[[str, dict], Any] | None:
    """``emit(kind, fields)`` straight to ``Tracer.emit_trusted`` of the tracer ``node.trace``
    writes to, for the frame events this channel builds itself (the per-message hot path: the
    same events and bytes, without re-checking and copying what is known to be plain JSON).
    Only for the two runtimes' nodes, whose ``trace`` is exactly ``tracer.emit(node.name, ...)``;
    None for any other node (its ``trace`` is used)."""
    from rmqlab.runtime.real import RealNode
    from rmqlab.runtime.sim.node import SimNode
    from rmqlab.trace import Tracer

    trace = getattr(type(node), "trace", None)
    if trace is RealNode.trace:
        tracer = node.tracer  # type: ignore[attr-defined]
    elif trace is SimNode.trace:
        tracer = node.sim.tracer  # type: ignore[attr-defined]
    else:
        return None
    if type(tracer) is not Tracer:
        return None
    name = node.name  # type: ignore[attr-defined]
    emit_trusted = tracer.emit_trusted
    return lambda kind, fields: emit_trusted(name, kind, fields)


class RemotingChannel:
    """A connection carrying RemotingCommands both ways; see the module docstring."""

    def __init__(self, node: Node, reader: Any, writer: Any, owner: RemotingAbstract,
                 remote_addr: str | None = None):
        self.node = node
        self.owner = owner
        self._reader = reader
        self._writer = writer
        # A client names the channel by the address it dialled; an accepted one by its peer.
        self.remote_addr = remote_addr or peer_address(writer.get_extra_info("peername"))
        self._decoder = FrameDecoder()
        self._pending: dict[int, asyncio.Future] = {}
        # The async requests among them, opaque -> (expiry in now_ms, timeout_ms): what the
        # owner's scan_response_table reads (RocketMQ's ResponseFuture beginTimestamp/timeoutMillis).
        self._scanned: dict[int, tuple[float, float]] = {}
        self._next_opaque = 0
        self._closed = False
        self.close_reason: str | None = None
        self._run_done: asyncio.Event | None = None
        self._run_task: asyncio.Task | None = None
        # Frame events go to the node's tracer without emit's checks (see _trace_emitter).
        self._emit_trusted = _trace_emitter(node)
        # Frames waiting for the flush at the start of the next loop iteration (TCP only).
        self._coalesce = isinstance(writer, asyncio.StreamWriter)
        self._out: list[bytes] = []
        # Idle detection (``IdleStateHandler(0, 0, serverChannelMaxIdleTimeSeconds)``, see
        # watch_idle): the node time of the last whole frame read or frame written.
        self.last_activity_ms = node.now_ms()
        self._max_idle_ms = 0.0
        self._idle_timer: Any = None
        # The server's budget for unfinished frames across its connections (BufferBudget), if any.
        self.buffer_budget: Any = None

    def __repr__(self) -> str:
        state = f"closed: {self.close_reason}" if self._closed else "open"
        return f"RemotingChannel({self.remote_addr}, {state}, {len(self._pending)} pending)"

    def is_active(self) -> bool:
        return not self._closed and not self._writer.is_closing()

    @property
    def pending_count(self) -> int:
        """Requests sent on this channel still waiting for their response."""
        return len(self._pending)

    # -- reading --------------------------------------------------------------------------------
    async def run(self) -> None:
        """Read and dispatch frames until the connection ends; then close the channel.

        Runs as a node task spawned by the channel's owner; :meth:`close` cancels it.
        """
        self._run_done = asyncio.Event()
        self._run_task = asyncio.current_task()
        reason = "remote"
        try:
            while not self._closed:
                try:
                    data = await self._reader.read(_READ_SIZE)
                except (ConnectionError, OSError) as e:
                    reason = f"reset: {e}" if str(e) else "reset"
                    break
                if not data:
                    break  # EOF: the peer closed its side
                try:
                    commands = self._decoder.feed(data)
                except FrameError as e:
                    # Frames completed before the bad one arrived intact; Netty hands them on too.
                    for cmd in e.commands:
                        self._dispatch(cmd)
                    reason = f"frame error: {clip(e.reason)}"
                    self.node.log.warning("remoting: closing the connection with %s: %s",
                                          self.remote_addr, clip(e.reason))
                    break
                for cmd in commands:
                    self._dispatch(cmd)
                if self.buffer_budget is not None:
                    self.buffer_budget.account(self, self._decoder.buffered)
        except asyncio.CancelledError:
            reason = "local"
            raise
        except Exception as e:  # a bug here must not leave a half-dead connection behind
            self.node.log.exception("remoting: reading from %s failed", self.remote_addr)
            reason = f"internal error: {exception_simple_desc(e)}"
        finally:
            self.close(reason)
            self._run_done.set()

    def _dispatch(self, cmd: RemotingCommand) -> None:
        # A whole frame is activity; bytes of an unfinished one are not: Netty's IdleStateHandler
        # sits after NettyDecoder in NettyRemotingServer's pipeline, so it sees decoded commands only.
        self.last_activity_ms = self.node.now_ms()
        # As on the wire: what arrived, mixed types from some clients included.
        self._trace("frame.recv", cmd, cmd.frame_size or 0, cmd.ext_fields)
        if cmd.is_response_type():
            future = self._pending.pop(cmd.opaque, None)
            if future is None:
                # Late (after its timeout) or unsolicited; RocketMQ logs and drops it too.
                self.node.log.warning("remoting: response from %s matches no pending request: %r",
                                      self.remote_addr, cmd)
            elif not future.done():
                future.set_result(cmd)
        else:
            self.node.spawn(self.owner.process_request_command(self, cmd))

    # -- writing --------------------------------------------------------------------------------
    def _trace(self, kind: str, cmd: RemotingCommand, size: int, ext_fields: dict | None) -> None:
        """One ``frame.send`` / ``frame.recv`` event. ``ext_fields``: a dict of the frame's own for
        ``frame.send`` (what ``encode_frame`` wrote, str values, nobody else holds it), the decoded
        command's for ``frame.recv`` (copied here: the processor gets the same dict)."""
        describe = self.owner.describe_response_code if cmd.is_response_type() else self.owner.describe_request_code
        body = cmd.body
        remark = cmd.remark
        fields = {"proto": "remoting", "peer": self.remote_addr, "size": size, "code": cmd.code,
                  "name": describe(cmd.code), "opaque": cmd.opaque, "flag": cmd.flag, "remark": remark,
                  "body_size": len(body) if body else 0}
        emit = self._emit_trusted
        if kind == "frame.recv":
            # Decoded from the wire: ints, str without a lone surrogate (the decoder refuses
            # one), extFields of str keys and str/int/bool values: plain JSON as it is. The
            # extFields are copied, as the processor gets the same dict and may change it.
            if ext_fields is not None:
                fields["ext_fields"] = dict(ext_fields)
        else:
            # Built from the caller's command: the values emit would not keep as they are (an
            # int subclass, non-ASCII text that may hold a lone surrogate) take emit's path,
            # which normalizes or refuses them (the send then fails before writing, as before).
            if ext_fields is not None:
                fields["ext_fields"] = ext_fields  # encode_frame's own dict of str values
                try:
                    if not ("".join(ext_fields).isascii() and "".join(ext_fields.values()).isascii()):
                        emit = None
                except TypeError:  # not all str
                    emit = None
            if type(cmd.code) is not int or type(cmd.flag) is not int or type(cmd.opaque) is not int or \
                    (remark is not None and (type(remark) is not str or not remark.isascii())):
                emit = None
        if emit is not None:
            emit(kind, fields)
        else:
            self.node.trace(kind, **fields)

    def _check_open(self) -> None:
        if self._closed or self._writer.is_closing():
            raise RemotingConnectError(self.remote_addr, f"connection closed ({self.close_reason or 'closing'})")

    def send_command(self, cmd: RemotingCommand) -> int:
        """Encode ``cmd`` and hand the frame to the connection without waiting for it to drain;
        returns the frame's size. RemotingConnectError when the channel is closed."""
        self._check_open()
        frame, ext_fields = cmd.encode_frame()
        if len(frame) > FRAME_MAX_LENGTH:
            # The peer's decoder would drop the connection, and every request on it, for this.
            raise RemotingCommandError(f"frame of {len(frame)} bytes exceeds the {FRAME_MAX_LENGTH}-byte limit")
        # Traced first: a value the trace refuses then fails the send before anything is written.
        self._trace("frame.send", cmd, len(frame), ext_fields)
        self.last_activity_ms = self.node.now_ms()
        if self._coalesce:
            out = self._out
            out.append(frame)
            if len(out) == 1:
                asyncio.get_running_loop().call_soon(self._flush_out)
        else:
            self._writer.write(frame)
        return len(frame)

    def _flush_out(self) -> None:
        """Hand the coalesced frames to the transport (one write)."""
        out, self._out = self._out, []
        if out and not self._writer.is_closing():
            self._writer.write(out[0] if len(out) == 1 else b"".join(out))

    async def write_command(self, cmd: RemotingCommand) -> None:
        """:meth:`send_command`, then wait until the connection accepts more (flow control).

        A coalesced frame is handed over one loop iteration later, so the flow control applies
        from then on; what one iteration adds is bounded by what it can produce."""
        self.send_command(cmd)
        try:
            await self._writer.drain()
        except (ConnectionError, OSError) as e:
            self.close(f"reset: {e}" if str(e) else "reset")
            raise RemotingConnectError(self.remote_addr, f"write failed: {e}") from e

    async def invoke(self, request: RemotingCommand, timeout_ms: float) -> RemotingCommand:
        """Send ``request`` and wait for its response (``invokeSyncImpl``).

        Sets ``request.opaque``. Raises RemotingTimeoutError after ``timeout_ms`` and
        RemotingConnectError when the connection is or gets closed first.
        """
        if request.is_response_type() or request.is_oneway_rpc():
            raise ValueError(f"invoke needs a two-way request, not flag {request.flag:#b}")
        self._check_open()
        opaque = self._next_opaque
        self._next_opaque = (opaque + 1) & _OPAQUE_MASK
        request.opaque = opaque
        future = asyncio.get_running_loop().create_future()
        self._pending[opaque] = future
        timer = self.node.call_later(timeout_ms, self._expire, opaque, timeout_ms)
        try:
            # Not drained here: the timeout must bound the whole call, and a peer that stopped
            # reading would hold a drain forever. The transport buffers the frame; the number of
            # requests a caller keeps in flight bounds what piles up.
            self.send_command(request)
            return await future
        finally:
            timer.cancel()
            self._pending.pop(opaque, None)

    def _expire(self, opaque: int, timeout_ms: float) -> None:
        future = self._pending.pop(opaque, None)
        if future is not None and not future.done():
            future.set_exception(RemotingTimeoutError(self.remote_addr, timeout_ms))

    async def invoke_async(self, request: RemotingCommand, timeout_ms: float) -> RemotingCommand:
        """Send ``request`` and wait for its response (``invokeAsyncImpl``, the response awaited
        instead of handed to an InvokeCallback).

        Sets ``request.opaque``. No timer per request: the owner's ``scan_response_table`` fails
        it with RemotingTimeoutError at its first scan (once a second) at or after ``begin +
        timeout_ms + 1000`` ms, as RocketMQ's scan does; RemotingConnectError when the connection
        is or gets closed first. Deviation: RocketMQ also bounds the requests in flight
        (``semaphoreAsync``, 65535 permits); here the caller's own limit is the only one.
        """
        if request.is_response_type() or request.is_oneway_rpc():
            raise ValueError(f"invoke needs a two-way request, not flag {request.flag:#b}")
        self._check_open()
        opaque = self._next_opaque
        self._next_opaque = (opaque + 1) & _OPAQUE_MASK
        request.opaque = opaque
        future = asyncio.get_running_loop().create_future()
        self._pending[opaque] = future
        self._scanned[opaque] = (self.node.now_ms() + timeout_ms + SCAN_GRACE_MS, timeout_ms)
        self.owner.watch_response_table(self)
        try:
            self.send_command(request)  # not drained, as in invoke
            return await future
        finally:
            # The response popped _pending already; what is left goes here (one miss, one hit).
            self._pending.pop(opaque, None)
            self._scanned.pop(opaque, None)

    def scan_response_table(self, now_ms: float) -> bool:
        """Fail this channel's async requests whose ``begin + timeout + 1000`` ms is at or before
        ``now_ms`` (``NettyRemotingAbstract.scanResponseTable``), in the order they were sent;
        True while async requests remain."""
        scanned = self._scanned
        expired = [opaque for opaque, (expiry, _) in scanned.items() if expiry <= now_ms]
        for opaque in expired:
            timeout_ms = scanned.pop(opaque)[1]
            future = self._pending.pop(opaque, None)
            if future is not None and not future.done():
                self.node.log.warning("remoting: remove timeout request, opaque %d to %s (%g ms)",
                                      opaque, self.remote_addr, timeout_ms)
                future.set_exception(RemotingTimeoutError(self.remote_addr, timeout_ms))
        return bool(scanned)

    async def invoke_oneway(self, request: RemotingCommand) -> None:
        """Send ``request`` marked oneway (``invokeOnewayImpl``): the peer sends nothing back."""
        if request.is_response_type():
            raise ValueError("a response cannot be sent as a oneway request")
        request.mark_oneway_rpc()
        request.opaque = self._next_opaque
        self._next_opaque = (self._next_opaque + 1) & _OPAQUE_MASK
        await self.write_command(request)

    async def write_response(self, request: RemotingCommand, response: RemotingCommand | None) -> None:
        """``NettyRemotingAbstract.writeResponse``: answer ``request`` with ``response``.

        Nothing is sent for a oneway request or a None response. A response that cannot be
        encoded (a processor bug) is replaced by SYSTEM_ERROR naming the problem, so the caller
        is not left to time out; a closed channel drops the response with a log line, as the
        client is gone.
        """
        if response is None or request.is_oneway_rpc():
            return
        response.opaque = request.opaque
        response.mark_response_type()
        try:
            try:
                await self.write_command(response)
            except ValueError as e:  # RemotingCommandError included
                self.node.log.error("remoting: response to request code %s cannot be sent: %s",
                                    request.code, e)
                error = RemotingCommand.create_response_command(RemotingSysResponseCode.SYSTEM_ERROR,
                                                                exception_simple_desc(e))
                error.opaque = request.opaque
                await self.write_command(error)
        except RemotingConnectError as e:
            self.node.log.info("remoting: response to request code %s (opaque %d) not sent: %s",
                               request.code, request.opaque, e.reason)

    # -- idle connections -----------------------------------------------------------------------
    def watch_idle(self, max_idle_ms: float) -> None:
        """Close this connection once no whole frame was read or written for ``max_idle_ms``
        (``IdleStateHandler(0, 0, serverChannelMaxIdleTimeSeconds)`` and NettyConnectManageHandler
        closing the channel on ALL_IDLE, with its log line). As Netty's handler does, one timer
        at a time, re-armed for the rest of the interval when there was activity meanwhile; on
        the node's clock, so the simulator times it deterministically."""
        if max_idle_ms <= 0 or self._closed:
            return  # 0 disables it, as IdleStateHandler's 0 does
        self._max_idle_ms = max_idle_ms
        self._idle_timer = self.node.call_later(max_idle_ms, self._idle_check)

    def _idle_check(self) -> None:
        self._idle_timer = None
        if self._closed:
            return
        idle_for = self.node.now_ms() - self.last_activity_ms
        if idle_for >= self._max_idle_ms:
            self.node.log.warning("NETTY SERVER PIPELINE: IDLE exception [%s]", self.remote_addr)
            self.close("idle")
        else:
            self._idle_timer = self.node.call_later(self._max_idle_ms - idle_for, self._idle_check)

    # -- closing --------------------------------------------------------------------------------
    def close(self, reason: str = "local") -> None:
        """Close the connection now; pending requests fail with RemotingConnectError.

        ``reason`` goes to the ``net.close`` trace event: ``local`` when this side decided,
        ``remote`` when the peer closed, ``reset``, or an error message. Closing twice is a no-op.
        """
        if self._closed:
            return
        self._closed = True
        self.close_reason = reason
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        self._decoder = FrameDecoder()  # an unfinished frame's bytes go now, not when the task ends
        self.node.trace("net.close", peer=self.remote_addr, reason=reason)
        try:
            self._flush_out()  # what was sent before the close goes first, as with an immediate write
            self._writer.close()
        except (ConnectionError, OSError):
            pass  # already gone; closing is all that was wanted
        pending, self._pending = self._pending, {}
        self._scanned = {}
        for future in pending.values():
            if not future.done():
                future.set_exception(RemotingConnectError(self.remote_addr, f"connection closed ({reason})"))
        # Stop the reader now rather than trusting every runtime to end a pending read when the
        # writer closes.
        if self._run_task is not None and self._run_task is not asyncio.current_task():
            self._run_task.cancel()
        self.owner.on_channel_closed(self)

    async def aclose(self, reason: str = "local", flush_limit_ms: float = 1000) -> None:
        """:meth:`close`, then wait until the reader has stopped and the connection is closed.

        Closing a connection first flushes what is still buffered for the peer, which never ends
        if the peer stopped reading; so the wait for that is bounded by ``flush_limit_ms``.
        """
        self.close(reason)
        if self._run_done is not None:
            await self._run_done.wait()
        waiter = self.node.spawn(self._writer.wait_closed(), name=f"remoting-close {self.remote_addr}")
        timer = self.node.call_later(flush_limit_ms, waiter.cancel)
        try:
            # asyncio.wait never raises the waiter's outcome; our own cancellation still does.
            await asyncio.wait({waiter})
        finally:
            timer.cancel()
        if not waiter.cancelled():
            waiter.exception()  # retrieved and dropped: a reset while closing still means closed
