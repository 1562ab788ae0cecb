"""`rmqlab lab`: JupyterLab on the labs/ folder of this checkout.

It replaces itself with `python -m jupyterlab` (this interpreter, so the kernels see the installed
rmqlab), serving on 127.0.0.1 unless told otherwise: a lab runs simulated clusters and, in its
real-process sections, servers on loopback ports; nothing needs to be reachable from outside.
JupyterLab runs with binder/jupyterlab-settings/overrides.json, as on Binder: no news toast.
"""

from __future__ import annotations

import os
import sys

_CHECKOUT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LABS_DIR = os.path.join(_CHECKOUT, "labs")
# JupyterLab's app settings overrides, the same file binder/postBuild installs for Binder: "fetchNews":
# "false", so the "get notified about official Jupyter news?" toast does not cover the figures.
SETTINGS_DIR = os.path.join(_CHECKOUT, "binder", "jupyterlab-settings")


def add_arguments(parser) -> None:
    parser.add_argument("--dir", default=LABS_DIR, help="the notebooks' folder (default: labs/ of this checkout)")
    parser.add_argument("--ip", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8888, help="port (default 8888; the next free one if taken)")
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser tab")


def jupyterlab_argv(args) -> list[str]:
    if not os.path.isdir(args.dir):
        raise SystemExit(f"rmqlab lab: no notebooks folder at {args.dir} (rmqlab lab opens the labs/ folder of a "
                         "source checkout; pass --dir to point elsewhere)")
    argv = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={os.path.abspath(args.dir)}",
            f"--ServerApp.ip={args.ip}", f"--ServerApp.port={args.port}"]
    if os.path.isfile(os.path.join(SETTINGS_DIR, "overrides.json")):
        # JupyterLab reads overrides.json from one app settings directory (default
        # <prefix>/share/jupyter/lab/settings, which a pip or venv install leaves empty); the
        # user's own settings (~/.jupyter/lab/user-settings) still apply on top.
        argv.append(f"--LabApp.app_settings_dir={SETTINGS_DIR}")
    if args.no_browser:
        argv.append("--no-browser")
    if os.geteuid() == 0:  # containers and CI run as root; JupyterLab refuses that unless told
        argv.append("--allow-root")
    return argv


def run(args) -> int:
    argv = jupyterlab_argv(args)
    sys.stdout.flush()
    os.execv(argv[0], argv)
    return 0  # not reached: execv replaces this process
