"""rmqlab: a notebook-driven lab for learning how Apache RocketMQ stays available and loses no data.

Components mirror RocketMQ's module layout (store/, remoting/, namesrv/, broker/, controller/,
proxy/, client/) so a learner can read RocketMQ's source beside ours. Methods are snake_case;
configuration fields keep RocketMQ's camelCase key names so a .properties file maps 1:1.
"""

__version__ = "0.1.0"
