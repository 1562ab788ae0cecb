"""rmqlab.spark: what running on Spark needs, for the grader and the chaos campaigns alike.

Modules: session (the one SparkSession of a process, on loopback; shipping rmqlab to a cluster's
executors), jobs (a job of independent tasks with progress), standalone (a Spark standalone
cluster on 127.0.0.1, started from pyspark's own launcher).
"""
