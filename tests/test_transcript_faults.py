"""A transcript whose writes fail (issue 13 item 4): counted and named, never raised, recovered by itself.

The "full disk" is ``RLIMIT_FSIZE`` in a child process (writes past it fail
with EFBIG after a short write), so the test needs no mount; the daemon-level
case with a real full tmpfs is tests/faults/test_disk.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent("""
    import json, resource, sys
    from pathlib import Path
    from supervisor.session.transcript import Transcript
    t = Transcript(Path(sys.argv[1]), "s1")
    t.write(b"before the disk fills\\r\\n")
    resource.setrlimit(resource.RLIMIT_FSIZE, (200, resource.RLIM_INFINITY))
    released = [t.write(b"line %d of output while the disk is full\\r\\n" % i) for i in range(20)]
    during = {"problem": t.problem, "failing": t.failing, "lost": t.lost_bytes,
              "released": sum(map(len, released)), "chars": t.clean_chars}
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    t.write(b"after space returns\\r\\n")
    after = {"problem": t.problem, "failing": t.failing}
    t.close()
    print(json.dumps({"during": during, "after": after}))
""")


def test_write_failures_are_named_and_recovered_from(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[1]
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "t")], capture_output=True, text=True,
                            timeout=60, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    during, after = report["during"], report["after"]
    assert during["failing"] and during["lost"] > 0
    assert during["problem"] == f"transcript: EFBIG, {during['lost']} bytes not written"
    assert during["released"] > 700  # attached viewers still got every chunk
    assert during["chars"] > 700  # and the context estimate counts what the agent printed
    assert not after["failing"] and "writing again since" in after["problem"]
    text = (tmp_path / "t" / "s1.txt").read_text()
    assert text.startswith("before the disk fills\n") and text.endswith("after space returns\n")
