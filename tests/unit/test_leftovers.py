"""What a test run left running is found by the mark its processes inherit, named, and
stopped (testbed/leftovers.py, which hack/run-tests.sh runs once the lanes have ended)."""

from __future__ import annotations

import os
import subprocess
import sys

from testbed.leftovers import MARK


def leftovers(mark: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "testbed.leftovers"], capture_output=True,
                          text=True, timeout=60, env={**os.environ, MARK: mark})


def test_a_process_the_run_left_is_named_and_stopped() -> None:
    mark = f"test-{os.getpid()}"
    # in a session of its own, as the harness starts its daemons: no signal to the run's
    # process group reaches it
    orphan = subprocess.Popen(["sleep", "600"], env={**os.environ, MARK: mark},
                              start_new_session=True)
    other = subprocess.Popen(["sleep", "600"], env={**os.environ, MARK: "another-run"})
    try:
        out = leftovers(mark)
        assert out.returncode == 1, out.stderr
        assert f"left running by the tests: pid {orphan.pid} " in out.stdout
        assert "sleep 600" in out.stdout
        assert orphan.wait(10) is not None  # stopped
        assert other.poll() is None  # another run's is none of this one's
        assert leftovers(mark).returncode == 0
    finally:
        for proc in (orphan, other):
            proc.kill()
            proc.wait()
