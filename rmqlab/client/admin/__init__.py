"""The admin client (``org.apache.rocketmq.tools.admin``)."""

from rmqlab.client.admin.default_mq_admin_ext import DefaultMQAdminExt

__all__ = ["DefaultMQAdminExt"]
