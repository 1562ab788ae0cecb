"""POP consumption on the broker (RocketMQ 5): the per-queue pop lock and the revive service.

RocketMQ keeps both in ``broker/.../processor`` (``PopMessageProcessor.QueueLockManager``,
``PopReviveService``); rmqlab gives them a package of their own. The processors are in
``rmqlab.broker.processor`` (pop, ack, change invisible time), long polling in
``rmqlab.broker.longpolling.pop_long_polling_service`` and the orderly state in
``rmqlab.broker.offset.consumer_order_info_manager``.
"""
