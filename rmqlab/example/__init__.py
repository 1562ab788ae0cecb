"""Example applications of rmqlab's clients, mirroring RocketMQ's ``example`` module
(``org.apache.rocketmq.example``): see ``rmqlab.example.benchmark``."""
