"""FrameDecoder: bytes from a connection in, whole RemotingCommands out (RocketMQ's
``NettyDecoder``, a length-prefixed frame decoder).

RocketMQ's ``NettyDecoder`` is a ``LengthFieldBasedFrameDecoder(16777216, 0, 4, 0, 4)`` followed
by ``RemotingCommand.decode``: it waits until a whole frame is buffered, cuts it off by its
length prefix and decodes it; any failure closes the channel. This is the same as a protocol core
without I/O: :meth:`FrameDecoder.feed` takes whatever the socket produced, returns the commands it
completed, keeps a partial frame for the next call, and never looks beyond the bytes it was given.

A bad frame raises :class:`FrameError` and poisons the decoder (the stream has lost its framing;
the owner closes the connection). The checks, in order:

* the length prefix is negative or below 4 (no room for the header-info int);
* the frame (prefix included) exceeds ``max_frame_length``, 16777216 by default: Netty's
  ``maxFrameLength`` counts the 4 prefix bytes, so the largest prefix value is 16777212. This is
  judged from the prefix alone, before the frame arrives, so an oversized frame is refused
  without buffering it;
* then ``RemotingCommand.decode``: header length beyond the frame, unknown serialize type, bad
  JSON or binary header.
"""

from __future__ import annotations

import struct

from rmqlab.remoting.exceptions import FrameError
from rmqlab.remoting.remoting_command import RemotingCommand

FRAME_MAX_LENGTH = 16777216  # NettyDecoder: com.rocketmq.remoting.frameMaxLength default
_PREFIX = struct.Struct(">i")  # the length prefix, signed as Java reads it


class FrameDecoder:
    """Incremental decoder for one connection's incoming byte stream."""

    __slots__ = ("max_frame_length", "_buf", "_failed")

    def __init__(self, max_frame_length: int = FRAME_MAX_LENGTH):
        self.max_frame_length = max_frame_length
        self._buf = bytearray()
        self._failed: str | None = None

    @property
    def buffered(self) -> int:
        """Bytes held back as the start of an incomplete frame."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[RemotingCommand]:
        """Add ``data``; return the commands it completed, in order (possibly none).

        Raises FrameError at the first bad frame, carrying the commands completed before it in
        ``FrameError.commands``; every later call raises FrameError again.
        """
        if self._failed is not None:
            raise FrameError(f"decoder already failed: {self._failed}")
        buf = self._buf
        if buf:
            buf += data
            src = buf
        else:
            src = data  # nothing held back: decode straight from what arrived, without copying it
        out: list[RemotingCommand] = []
        pos = 0
        decode_from = RemotingCommand.decode_from
        # The view is released before the buffer is resized (a live export would make
        # `del buf[:pos]` fail); each command copies its header and body out of it.
        with memoryview(src) as view:
            view = view.cast("B") if view.format != "B" or view.ndim != 1 else view
            size = view.nbytes
            try:
                while size - pos >= 4:
                    length = _PREFIX.unpack_from(view, pos)[0]
                    if length < 4:
                        raise FrameError(f"frame length {length} is below 4 (no room for the header info)")
                    if length + 4 > self.max_frame_length:
                        raise FrameError(f"frame of {length + 4} bytes exceeds the {self.max_frame_length}-byte "
                                         "frame limit")
                    end = pos + 4 + length
                    if end > size:
                        break
                    out.append(decode_from(view, pos + 4, end))
                    pos = end
            except FrameError as e:
                self._failed = e.reason
                failure = FrameError(e.reason, out)
            else:
                failure = None
                rest = bytes(view[pos:]) if src is not buf and pos < size else None
        if failure is not None:
            buf.clear()
            raise failure
        if src is buf:
            if pos:
                del buf[:pos]
        elif rest is not None:
            buf += rest  # the start of a frame still to come
        return out
