"""hack/apt.sh: the set-up scripts wait for the package manager's lock instead of failing."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LOCKED = ("E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242 "
          "(apt-get)")


def fake_apt_get(tmp_path: Path, failures: int, message: str) -> Path:
    """An apt-get that fails `failures` times with `message`, then succeeds; it records
    each call's arguments in calls.txt."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "apt-get"
    script.write_text(f"""#!/bin/sh
echo "$@" >> {tmp_path}/calls.txt
n=$(wc -l < {tmp_path}/calls.txt)
if [ "$n" -le {failures} ]; then echo "{message}" >&2; exit 100; fi
echo installed
""")
    script.chmod(0o755)
    return bin_dir


def apt_get(tmp_path: Path, bin_dir: Path, wait: int = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", f'source {REPO}/hack/apt.sh; apt_sudo=""; apt_get install -y openmpi-bin'],
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "APT_LOCK_POLL": "0",
             "APT_LOCK_WAIT": str(wait)},
        capture_output=True, text=True, timeout=60)


def test_a_held_lock_is_waited_for(tmp_path: Path) -> None:
    out = apt_get(tmp_path, fake_apt_get(tmp_path, failures=2, message=LOCKED))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "installed"
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    assert len(calls) == 3
    assert all("DPkg::Lock::Timeout=" in c and c.endswith("install -y openmpi-bin")
               for c in calls)
    assert out.stderr.count("another package manager holds the lock") == 2


def test_any_other_failure_fails_at_once(tmp_path: Path) -> None:
    out = apt_get(tmp_path, fake_apt_get(tmp_path, failures=5,
                                         message="E: Unable to locate package openmpi-bin"))
    assert out.returncode == 100
    assert len((tmp_path / "calls.txt").read_text().splitlines()) == 1
    assert "Unable to locate package" in out.stderr


def test_the_wait_ends(tmp_path: Path) -> None:
    out = apt_get(tmp_path, fake_apt_get(tmp_path, failures=10**6, message=LOCKED), wait=0)
    assert out.returncode == 100
    assert len((tmp_path / "calls.txt").read_text().splitlines()) == 1
