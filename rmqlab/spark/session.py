"""The Spark session of a process (the grader's, a campaign's, a lab kernel's): local[2], 512m
driver, loopback, no UI, one session per process.

`get_spark(master)` sets PYSPARK_PYTHON to the running interpreter and SPARK_LOCAL_IP to 127.0.0.1
before the first session (the JVM reads both at launch; as observed with pyspark 4.3, without
PYSPARK_PYTHON the workers run whatever `python3` is first on PATH, and without SPARK_LOCAL_IP Spark
binds a non-loopback address), so the workers run this venv's Python with rmqlab importable, and
everything stays on loopback. JVM settings are fixed at the first launch (observed too), so later
calls return the same session whatever `master` they ask for.

For a non-local master (`spark://...`), `ship_package(sc)` sends rmqlab (the package and the conf/
directory next to it, which rmqlab.cluster reads through CONF_DIR) as an archive with
`sc.addArchive`; `ensure_importable()` — run at the start of every task — puts the unpacked archive
on sys.path when the worker cannot import rmqlab from its own environment.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tarfile
import tempfile

ARCHIVE_NAME = "rmqlab_pkg"   # the directory name executors unpack the archive into

_session = None


def get_spark(master: str = "local[2]", app_name: str = "rmqlab"):
    """The process's SparkSession (created on the first call with the settings above)."""
    global _session
    if _session is not None:
        return _session
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession
    builder = (SparkSession.builder.master(master).appName(app_name)
               .config("spark.driver.memory", "512m")
               .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2").config("spark.default.parallelism", "2"))
    if is_local(master):
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    _session = builder.getOrCreate()
    _session.sparkContext.setLogLevel("ERROR")
    return _session


def is_local(master: str) -> bool:
    return master == "local" or master.startswith("local[") or master.startswith("local-cluster[")


def stop_spark() -> None:
    global _session
    if _session is not None:
        _session.stop()
        _session = None


def package_archive(dest_dir: str) -> str:
    """A .tar.gz of the rmqlab package and the conf/ directory beside it (the layout rmqlab.cluster's
    CONF_DIR expects), without caches."""
    import rmqlab
    pkg = os.path.dirname(os.path.abspath(rmqlab.__file__))
    root = os.path.dirname(pkg)
    path = os.path.join(dest_dir, ARCHIVE_NAME + ".tar.gz")

    def keep(info: tarfile.TarInfo):
        return None if "__pycache__" in info.name or info.name.endswith(".pyc") else info

    with tarfile.open(path, "w:gz") as tar:
        tar.add(pkg, arcname="rmqlab", filter=keep)
        conf = os.path.join(root, "conf")
        if os.path.isdir(conf):
            tar.add(conf, arcname="conf", filter=keep)
    return path


def ship_package(sc, master: str) -> str | None:
    """For a cluster master, add the rmqlab archive to the job (unpacked as ARCHIVE_NAME in each
    executor's working directory). Local masters need nothing: the workers are this venv's Python."""
    if is_local(master):
        return None
    tmp = tempfile.mkdtemp(prefix="rmqlab-ship-")
    # Spark's driver serves an added archive from this path for as long as the job may start
    # executors, so it goes when the driver's process exits, not when this function returns.
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    path = package_archive(tmp)
    sc.addArchive(path + "#" + ARCHIVE_NAME)
    return path


BOOTSTRAP_SOURCE = '''
def ensure_importable():
    """Make rmqlab importable in a Spark worker: from its own environment, else from the archive
    ship_package added (unpacked in the SparkFiles root or the executor's working directory)."""
    import importlib.util, os, sys
    if importlib.util.find_spec("rmqlab") is not None:
        return
    bases = [os.getcwd()]
    try:
        from pyspark import SparkFiles
        bases.insert(0, SparkFiles.getRootDirectory())
    except Exception:  # not in a Spark worker
        pass
    for base in bases:
        cand = os.path.join(base, "%s")
        if os.path.isdir(os.path.join(cand, "rmqlab")):
            sys.path.insert(0, cand)
            return
    raise ImportError("rmqlab is neither installed on this Spark worker nor shipped with the job")
''' % ARCHIVE_NAME


def boot_task(module: str, func: str):
    """A task function that Spark pickles BY VALUE (defined by exec, not importable), so a worker
    without rmqlab can unpickle it, fix sys.path, and only then import `module.func`."""
    ns: dict = {"__name__": "__rmqlab_boot__"}
    exec(BOOTSTRAP_SOURCE, ns)
    exec("def task(*args):\n"
         "    ensure_importable()\n"
         "    import importlib\n"
         f"    return getattr(importlib.import_module({module!r}), {func!r})(*args)\n", ns)
    return ns["task"]
