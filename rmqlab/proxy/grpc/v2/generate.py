"""Regenerate definition_pb2.py and service_pb2.py from the published .proto files.

The message classes of `apache.rocketmq.v2` are generated (issue 6 allows either the official
client's bundled copy or our own; bundling theirs would import the client's top-level `rocketmq`
package into rmqlab). The .proto sources are not kept here, only what protoc makes of them:

    git clone https://github.com/apache/rocketmq-apis   # commit 3e60073 was used
    pip install grpcio-tools==1.85.1
    python -m rmqlab.proxy.grpc.v2.generate path/to/rocketmq-apis

The files keep their upstream names in the descriptor pool (apache/rocketmq/v2/*.proto), so
this package and the official client's copy (registered as definition.proto / service.proto)
must never be imported into one process: the symbols would clash
(../shared/reference/real-clients.md, "Setup notes"). The official client only ever runs in its
own virtualenv as a subprocess.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PROTOS = ("definition.proto", "service.proto")


def generate(apis_root: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(apis_root, "apache", "rocketmq", "v2")
        for name in PROTOS:
            if not os.path.exists(os.path.join(src, name)):
                raise SystemExit(f"{os.path.join(src, name)} not found: give the root of a rocketmq-apis checkout")
        out = os.path.join(tmp, "out")
        os.makedirs(out)
        cmd = [sys.executable, "-m", "grpc_tools.protoc", f"-I{apis_root}", f"--python_out={out}"]
        cmd += [os.path.join("apache", "rocketmq", "v2", name) for name in PROTOS]
        subprocess.run(cmd, check=True, cwd=apis_root)
        for name in PROTOS:
            module = name.replace(".proto", "_pb2.py")
            with open(os.path.join(out, "apache", "rocketmq", "v2", module)) as f:
                text = f.read()
            # protoc writes imports for the upstream package path; point them at this package.
            text = re.sub(r"^from apache\.rocketmq\.v2 import", "from rmqlab.proxy.grpc.v2 import", text, flags=re.M)
            with open(os.path.join(HERE, module), "w") as f:
                f.write(text)
    shutil.rmtree(os.path.join(HERE, "__pycache__"), ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    generate(sys.argv[1])
