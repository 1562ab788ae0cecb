"""DLedger: the Raft library RocketMQ's DLedger CommitLog mode puts in the data path.

Mirrors openmessaging/dledger 0.3.1.2 (the version RocketMQ pins), package
io.openmessaging.storage.dledger. It is written here rather than borrowed from pysyncobj (which
the controller uses) because what DLedger mode teaches is what a Raft *commitlog* costs: every
message is a log entry that a majority must store before the producer hears SEND_OK.

  DLedgerConfig        one member's settings, with DLedger's defaults
  MemberState          role, term, vote, leader; the term and vote persisted in <root>/currterm
  entry/               DLedgerEntry and its 48-byte header
  store/               DLedgerStore (abstract), the in-memory store, the mapped-file store
  protocol/            request and response codes and bodies; the protocol core (its decisions as
                       tables and pure functions, with the theory of operation)
  DLedgerLeaderElector roles, terms, votes, heartbeats, leadership transfer, role-change handlers
  DLedgerEntryPusher   the leader's dispatchers and quorum ack checker, the follower's entry handler
  DLedgerRpcNettyService  DLedger's requests over rmqlab's remoting
  DLedgerServer        one member: the above plus the store; dledger_member runs one as a process
  utils/               IOUtils: the small properties files (currterm, checkpoint)

The broker's side of DLedger mode, DLedgerCommitLog, is rmqlab.store.dledger (RocketMQ's store
depends on DLedger, not the other way round).
"""
