"""Message format versions and magic codes (RocketMQ ``MessageVersion``).

The MAGICCODE field tells a reader how wide the TOPIC length is: V1 (``0xDAA320A7``) uses one
signed byte, V2 (``0xDAA320AB``) a signed short. The store picks V2 only for topics longer than
127 bytes, so almost every stored message is V1.
"""

from __future__ import annotations

import enum
import struct

MESSAGE_MAGIC_CODE = -626843481       # 0xDAA320A7, V1
MESSAGE_MAGIC_CODE_V2 = -626843477    # 0xDAA320AB, V2
BLANK_MAGIC_CODE = -875286124         # 0xCBD43194, end-of-file filler

_BYTE = struct.Struct(">b")
_SHORT = struct.Struct(">h")


class MessageVersion(enum.Enum):
    """``MessageVersion``: the member value is the magic code written in MAGICCODE."""

    MESSAGE_VERSION_V1 = MESSAGE_MAGIC_CODE
    MESSAGE_VERSION_V2 = MESSAGE_MAGIC_CODE_V2

    @property
    def magic_code(self) -> int:
        return self.value

    @property
    def topic_length_size(self) -> int:
        """Bytes of the TOPIC length field: 1 for V1, 2 for V2."""
        return 1 if self is MessageVersion.MESSAGE_VERSION_V1 else 2

    @property
    def max_topic_length(self) -> int:
        """Longest topic (UTF-8 bytes) the length field can hold: 127 (V1) or 32767 (V2);
        the field is signed in Java, a longer topic would read back as a negative length."""
        return 127 if self is MessageVersion.MESSAGE_VERSION_V1 else 32767

    def get_topic_length(self, buf, pos: int) -> int:
        """Read the TOPIC length at ``pos`` as Java does: a signed byte (V1) or short (V2)."""
        fmt = _BYTE if self is MessageVersion.MESSAGE_VERSION_V1 else _SHORT
        return fmt.unpack_from(buf, pos)[0]

    def pack_topic_length(self, topic_length: int) -> bytes:
        """The TOPIC length field for a topic of ``topic_length`` UTF-8 bytes."""
        fmt = _BYTE if self is MessageVersion.MESSAGE_VERSION_V1 else _SHORT
        return fmt.pack(topic_length)

    @classmethod
    def value_of_magic_code(cls, magic_code: int) -> MessageVersion:
        """The version whose magic code is ``magic_code``; ValueError for any other value
        (including BLANK_MAGIC_CODE, which marks a filler, not a message)."""
        try:
            return cls(magic_code)
        except ValueError:
            raise ValueError(
                f"invalid magic code {magic_code} (0x{magic_code & 0xFFFFFFFF:08X}); expected "
                f"0x{MESSAGE_MAGIC_CODE & 0xFFFFFFFF:08X} (V1) or "
                f"0x{MESSAGE_MAGIC_CODE_V2 & 0xFFFFFFFF:08X} (V2)") from None

    @classmethod
    def for_topic_length(cls, topic_length: int) -> MessageVersion:
        """V2 when the topic is longer than 127 bytes, else V1 (``MessageExtEncoder``, with
        ``autoMessageVersionOnTopicLen`` at its default true).

        CommitLog.asyncPutMessage compares ``topic.length()`` (UTF-16 units); rmqlab compares
        UTF-8 bytes, which is what the length field holds. The two agree for the ASCII topics
        TopicValidator allows; for other topics Java would write a corrupt V1 length."""
        return cls.MESSAGE_VERSION_V2 if topic_length > 127 else cls.MESSAGE_VERSION_V1
