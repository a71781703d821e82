"""The console entry point: exit codes, and no wait for calls a bounded wait gave up on."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_console_exits_with_the_command_code() -> None:
    done = _run(
        """
        from stream_nb.cli import console
        console(["inspect", "--snapshot", "/nonexistent/snapshot-dir"])
        """
    )
    assert done.returncode == 1, done.stderr
    assert "stream-nb inspect: cannot read snapshot" in done.stderr
    assert "exiting without waiting" not in done.stderr


def test_console_does_not_wait_for_an_abandoned_call_at_exit() -> None:
    # an exit handler that would block for ten minutes stands for a client library's
    # destructor waiting on the abandoned call; the command's own code is kept
    done = _run(
        """
        import atexit, logging, time
        from stream_nb.cli import console
        from stream_nb.engine import abandon
        atexit.register(time.sleep, 600)
        logging.getLogger("stream_nb").addHandler(logging.StreamHandler())
        abandon("closing the consumer")
        console(["inspect", "--snapshot", "/nonexistent/snapshot-dir"])
        """
    )
    assert done.returncode == 1, done.stderr
    assert (
        "exiting without waiting for 1 call(s) that did not return: closing the consumer"
        in done.stderr
    )
