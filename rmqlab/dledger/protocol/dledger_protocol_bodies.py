"""The request and response bodies of DLedger 0.3.1.2 (io.openmessaging.storage.dledger.protocol).

One class per Java class, each a RequestOrResponse with its own properties as fastjson writes them
(see request_or_response for the encoding):

  VoteRequest                 + ledgerEndIndex, ledgerEndTerm (both -1 by default)
  VoteResponse                + voteResult (RESULT's name; UNKNOWN by default)
  HeartBeatRequest/Response   base only
  PushEntryRequest            + commitIndex (-1), type (APPEND by default), entry, batchEntry, and
                              the computed batch, count, firstEntryIndex, lastEntryIndex, totalSize
  PushEntryResponse           + index (a Long: absent when null), beginIndex, endIndex, count
  AppendEntryRequest          + body (byte[], Base64)
  AppendEntryResponse         + index (-1), pos (-1)
  GetEntriesRequest           + beginIndex (Long), maxSize, indexList
  GetEntriesResponse          + entries
  MetadataRequest             base only
  MetadataResponse            + peers (id -> address, a HashMap: written in its iteration order)
  LeadershipTransferRequest   + transferId, transfereeId, takeLeadershipLedgerIndex
  LeadershipTransferResponse  base only

Not modelled: PullEntriesRequest/Response (DLedgerServer.handlePull returns null in 0.3.1.2) and
BatchAppendEntryRequest (the broker appends one entry per message).
"""

from __future__ import annotations

import enum
from typing import Any

from rmqlab.common.java_compat import java_hash_map_order
from rmqlab.dledger.entry.dledger_entry import DLedgerEntry
from rmqlab.dledger.protocol.dledger_response_code import DLedgerResponseCode, check
from rmqlab.dledger.protocol.request_or_response import (RequestOrResponse, bytes_from_json, bytes_to_json,
                                                         entry_from_json, entry_to_json, long_prop)


class VoteRequest(RequestOrResponse):
    _PROPS = (("ledgerEndIndex", "ledger_end_index"), ("ledgerEndTerm", "ledger_end_term"))

    def _init_props(self) -> None:
        self.ledger_end_index = -1
        self.ledger_end_term = -1

    def _prop_from_json(self, json_name: str, value: Any) -> Any:
        return long_prop(value, json_name)


class VoteResult(enum.Enum):
    """VoteResponse.RESULT."""
    UNKNOWN = "UNKNOWN"
    ACCEPT = "ACCEPT"
    REJECT_UNKNOWN_LEADER = "REJECT_UNKNOWN_LEADER"
    REJECT_UNEXPECTED_LEADER = "REJECT_UNEXPECTED_LEADER"
    REJECT_EXPIRED_VOTE_TERM = "REJECT_EXPIRED_VOTE_TERM"
    REJECT_ALREADY_VOTED = "REJECT_ALREADY_VOTED"
    REJECT_ALREADY_HAS_LEADER = "REJECT_ALREADY_HAS_LEADER"
    REJECT_TERM_NOT_READY = "REJECT_TERM_NOT_READY"
    REJECT_TERM_SMALL_THAN_LEDGER = "REJECT_TERM_SMALL_THAN_LEDGER"
    REJECT_EXPIRED_LEDGER_TERM = "REJECT_EXPIRED_LEDGER_TERM"
    REJECT_SMALL_LEDGER_END_INDEX = "REJECT_SMALL_LEDGER_END_INDEX"
    REJECT_TAKING_LEADERSHIP = "REJECT_TAKING_LEADERSHIP"


class ParseResult(enum.Enum):
    """VoteResponse.ParseResult: what a candidate makes of one round of votes."""
    WAIT_TO_REVOTE = "WAIT_TO_REVOTE"
    REVOTE_IMMEDIATELY = "REVOTE_IMMEDIATELY"
    PASSED = "PASSED"
    WAIT_TO_VOTE_NEXT = "WAIT_TO_VOTE_NEXT"


class VoteResponse(RequestOrResponse):
    _PROPS = (("voteResult", "vote_result"),)

    def _init_props(self) -> None:
        self.vote_result = VoteResult.UNKNOWN

    def _prop_to_json(self, json_name: str, value: Any) -> Any:
        return value.value

    def _prop_from_json(self, json_name: str, value: Any) -> Any:
        try:
            return VoteResult(value)
        except ValueError:
            raise ValueError(f"voteResult: unknown result {value!r}") from None

    @classmethod
    def of(cls, request: VoteRequest) -> VoteResponse:
        """new VoteResponse(request): the request's base fields copied."""
        return cls().copy_base_info(request)


class HeartBeatRequest(RequestOrResponse):
    pass


class HeartBeatResponse(RequestOrResponse):
    pass


class PushEntryType(enum.Enum):
    """PushEntryRequest.Type."""
    APPEND = "APPEND"
    COMMIT = "COMMIT"
    COMPARE = "COMPARE"
    TRUNCATE = "TRUNCATE"


class PushEntryRequest(RequestOrResponse):
    _PROPS = (("commitIndex", "commit_index"), ("type", "type"), ("entry", "entry"), ("batchEntry", "batch_entry"))

    def _init_props(self) -> None:
        self.commit_index = -1
        self.type = PushEntryType.APPEND
        self.entry: DLedgerEntry | None = None
        self.batch_entry: list[DLedgerEntry] = []
        self.total_size = 0

    def _prop_to_json(self, json_name: str, value: Any) -> Any:
        if json_name == "type":
            return value.value
        if json_name == "entry":
            return None if value is None else entry_to_json(value)
        if json_name == "batchEntry":
            return [entry_to_json(e) for e in value]
        return value

    def _prop_from_json(self, json_name: str, value: Any) -> Any:
        if json_name == "type":
            try:
                return PushEntryType(value)
            except ValueError:
                raise ValueError(f"type: unknown push type {value!r}") from None
        if json_name == "entry":
            return entry_from_json(value)
        if json_name == "batchEntry":
            if not isinstance(value, list):
                raise ValueError("batchEntry: expected a list")
            return [entry_from_json(e) for e in value]
        return long_prop(value, json_name)

    def _extra_json(self) -> dict[str, Any]:
        return {"batch": self.is_batch(), "count": self.get_count(), "firstEntryIndex": self.get_first_entry_index(),
                "lastEntryIndex": self.get_last_entry_index(), "totalSize": self.total_size}

    def add_entry(self, entry: DLedgerEntry) -> None:
        if self.batch_entry:
            check(self.batch_entry[0].index + len(self.batch_entry) == entry.index, DLedgerResponseCode.UNKNOWN,
                  "batch push wrong order")
        self.batch_entry.append(entry)
        self.total_size += entry.size

    def get_first_entry_index(self) -> int:
        if self.batch_entry:
            return self.batch_entry[0].index
        return self.entry.index if self.entry is not None else -1

    def get_last_entry_index(self) -> int:
        if self.batch_entry:
            return self.batch_entry[-1].index
        return self.entry.index if self.entry is not None else -1

    def get_count(self) -> int:
        if self.batch_entry:
            return len(self.batch_entry)
        return 1 if self.entry is not None else 0

    def clear(self) -> None:
        self.batch_entry = []
        self.total_size = 0

    def is_batch(self) -> bool:
        return bool(self.batch_entry)


class PushEntryResponse(RequestOrResponse):
    _PROPS = (("index", "index"), ("beginIndex", "begin_index"), ("endIndex", "end_index"), ("count", "count"))

    def _init_props(self) -> None:
        self.index: int | None = None  # a java.lang.Long: null (absent) for a COMMIT
        self.begin_index = 0
        self.end_index = 0
        self.count = 0

    def _prop_from_json(self, json_name: str, value: Any) -> Any:
        return long_prop(value, json_name)


class AppendEntryRequest(RequestOrResponse):
    _PROPS = (("body", "body"),)

    def _init_props(self) -> None:
        self.body: bytes | None = None

    def _prop_to_json(self, json_name: str, value: Any) -> Any:
        return bytes_to_json(value)

    def _prop_from_json(self, json_name: str, value: Any) -> Any:
        return bytes_from_json(value, json_name)


class AppendEntryResponse(RequestOrResponse):
    _PROPS = (("index", "index"), ("pos", "pos"))

    def _init_props(self) -> None:
        self.index = -1
        self.pos = -1

    def _prop_from_json(self, json_name: str, value: Any) -> Any:
        return long_prop(value, json_name)


class GetEntriesRequest(RequestOrResponse):
    _PROPS = (("beginIndex", "begin_index"), ("maxSize", "max_size"), ("indexList", "index_list"))

    def _init_props(self) -> None:
        self.begin_index: int | None = None
        self.max_size = 0
        self.index_list: list[int] | None = None

    def _prop_from_json(self, json_name: str, value: Any) -> Any:
        if json_name == "indexList":
            if not isinstance(value, list):
                raise ValueError("indexList: expected a list")
            return [long_prop(v, json_name) for v in value]
        return long_prop(value, json_name)


class GetEntriesResponse(RequestOrResponse):
    _PROPS = (("entries", "entries"),)

    def _init_props(self) -> None:
        self.entries: list[DLedgerEntry] = []

    def _prop_to_json(self, json_name: str, value: Any) -> Any:
        return None if value is None else [entry_to_json(e) for e in value]

    def _prop_from_json(self, json_name: str, value: Any) -> Any:
        if not isinstance(value, list):
            raise ValueError("entries: expected a list")
        return [entry_from_json(e) for e in value]


class MetadataRequest(RequestOrResponse):
    pass


class MetadataResponse(RequestOrResponse):
    _PROPS = (("peers", "peers"),)

    def _init_props(self) -> None:
        self.peers: dict[str, str] | None = None

    def _prop_to_json(self, json_name: str, value: Any) -> Any:
        if value is None:
            return None
        # MemberState's peerMap is a HashMap: fastjson writes it in the map's iteration order.
        return {k: value[k] for k in java_hash_map_order(list(value))}

    def _prop_from_json(self, json_name: str, value: Any) -> Any:
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise ValueError("peers: expected an object of strings")
        return {str(k): v for k, v in value.items()}


class LeadershipTransferRequest(RequestOrResponse):
    _PROPS = (("transferId", "transfer_id"), ("transfereeId", "transferee_id"),
              ("takeLeadershipLedgerIndex", "take_leadership_ledger_index"))

    def _init_props(self) -> None:
        self.transfer_id: str | None = None
        self.transferee_id: str | None = None
        self.take_leadership_ledger_index = 0

    def _prop_from_json(self, json_name: str, value: Any) -> Any:
        if json_name == "takeLeadershipLedgerIndex":
            return long_prop(value, json_name)
        if not isinstance(value, str):
            raise ValueError(f"{json_name}: expected a string")
        return value


class LeadershipTransferResponse(RequestOrResponse):
    pass
