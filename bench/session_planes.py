"""What a test waits for its control plane inside pytest: the session's first plane, and a
plane of its own from the pool started ahead.

``bench_controlplane`` runs this between its other runs (interleaved with Go's envtest):
one pytest session of generated tests, through the plugin as a user runs it.  Its first
test takes the session's plane and writes the plane's start time; then ``ISOLATED``
tests marked ``envtest_isolated`` each take a plane of their own from the pool, each
doing ``WORK_SECONDS`` of a test's own work (waiting, as a test waits on its operator),
which is when the pool starts the next one.  The plugin's summary line gives the median
wait of those hand-overs.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

ISOLATED = 5
WORK_SECONDS = 3.0
_WAIT = re.compile(r"control planes of tests' own: (\d+) handed over, median wait (\d+) ms")

TESTS = textwrap.dedent(f'''
    import os
    import time
    from pathlib import Path

    import pytest


    def test_first(envtest_session, namespace):
        Path(os.environ["SESSION_START_FILE"]).write_text(str(envtest_session.start_seconds))


    @pytest.mark.envtest_isolated
    @pytest.mark.parametrize("index", range({ISOLATED}))
    def test_own(envtest, namespace, index):
        time.sleep({WORK_SECONDS})  # the test's own work, while the pool starts the next plane
''')


def run_session(version: str) -> dict[str, Any]:
    """One session: the first plane's start and the pool's median wait, in seconds."""
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "test_planes.py").write_text(TESTS)
        start_file = Path(folder) / "session-start"
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
             "test_planes.py"], cwd=folder, capture_output=True, text=True, timeout=300,
            env={**os.environ, "ENVTEST_K8S_VERSION": version, "ENVTEST_INSTALLED_ONLY": "1",
                 "SESSION_START_FILE": str(start_file)})
        waited = _WAIT.search(result.stdout)
        if result.returncode != 0 or waited is None or not start_file.exists():
            raise RuntimeError(f"the session failed ({result.returncode}): "
                               f"{result.stdout[-2000:]}")
        return {"session_start_seconds": float(start_file.read_text()),
                "pool_handed_over": int(waited.group(1)),
                "pool_wait_seconds": int(waited.group(2)) / 1000}
