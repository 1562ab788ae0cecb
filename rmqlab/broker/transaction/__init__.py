"""Transactional messages, 4.x model (RocketMQ ``broker/src/main/java/org/apache/rocketmq/broker/transaction/``).

* ``queue.transactional_message_bridge`` - half messages in and out of RMQ_SYS_TRANS_HALF_TOPIC, op
  records in RMQ_SYS_TRANS_OP_HALF_TOPIC, the CID_RMQ_SYS_TRANS cursors;
* ``queue.transactional_op_batch_service`` - the RIP-50 batching of op records;
* ``queue.transactional_message_service_impl`` - prepare, commit/rollback lookups, the check walk;
* ``queue.default_transactional_message_check_listener`` - discarding to TRANS_CHECK_MAX_TIME_TOPIC;
* ``abstract_transactional_message_check_listener`` - sending CHECK_TRANSACTION_STATE;
* ``transactional_message_check_service`` - the periodic check (a special service);
* ``operation_result`` - what a commit or rollback lookup returns.

END_TRANSACTION itself is ``rmqlab.broker.processor.end_transaction_processor``.
"""
