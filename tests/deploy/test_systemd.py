"""deploy/systemd: ``systemd-analyze verify`` on the unit, and its environment file
against ``stream-nb run``.

``verify`` checks that ExecStart's binary exists, and the shipped unit points at
/opt/stream-nb/bin/stream-nb (the install path docs/operations.md uses), which a
test machine does not have. So the unit is verified twice: a copy whose ExecStart
is this virtualenv's stream-nb must verify without a single message, and the
shipped file must produce no message but the missing binary.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from deploy_helpers import DEPLOY, environment_with_venv, stream_nb_command, tool

UNIT = DEPLOY / "systemd" / "stream-nb.service"
ENV_FILE = DEPLOY / "systemd" / "stream-nb.env"
SHIPPED_BINARY = "/opt/stream-nb/bin/stream-nb"


def verify(unit: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("systemd-analyze", "systemd"), "verify", str(unit)],
        capture_output=True,
        text=True,
    )


def unit_copy(tmp_path: Path, replace: tuple[str, str] | None = None) -> Path:
    """The unit with ExecStart on this virtualenv's stream-nb (plus one edit)."""
    text = UNIT.read_text()
    assert f"ExecStart={SHIPPED_BINARY} run\n" in text
    text = text.replace(SHIPPED_BINARY, stream_nb_command()[0])
    if replace is not None:
        assert replace[0] in text
        text = text.replace(*replace)
    path = tmp_path / "stream-nb.service"
    path.write_text(text)
    return path


def settings(text: str) -> dict[str, list[str]]:
    """``{key: [values]}`` of a unit or environment file (comments skipped)."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            out.setdefault(key.strip(), []).append(value.strip())
    return out


def test_the_unit_verifies_without_a_message(tmp_path: Path) -> None:
    result = verify(unit_copy(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "stream-nb" not in result.stdout + result.stderr, result.stdout + result.stderr


def test_the_shipped_unit_lacks_only_its_binary() -> None:
    assert not Path(SHIPPED_BINARY).exists()
    result = verify(UNIT)
    messages = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert messages == [
        f"stream-nb.service: Command {SHIPPED_BINARY} is not executable: No such file or directory"
    ]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (("Restart=on-failure", "Restart=sometimes"), "Failed to parse service restart"),
        (("NoNewPrivileges=yes", "NoNewPrivilege=yes"), "Unknown key 'NoNewPrivilege'"),
    ],
)
def test_verify_reports_a_broken_unit(tmp_path: Path, edit: tuple[str, str], message: str) -> None:
    """The control for the test above: a typo does produce a message."""
    result = verify(unit_copy(tmp_path, edit))
    assert message in result.stdout + result.stderr


def test_the_unit_has_the_operational_settings() -> None:
    unit = settings(UNIT.read_text())
    assert unit["ExecStart"] == [f"{SHIPPED_BINARY} run"]
    assert unit["Restart"] == ["on-failure"]
    assert unit["KillSignal"] == ["SIGTERM"]
    # the final checkpoint may wait for a Kafka sink (a transactional commit: up to 60 s)
    assert int(unit["TimeoutStopSec"][0]) >= 150
    assert unit["StateDirectory"] == ["stream-nb"]
    assert unit["EnvironmentFile"] == ["/etc/stream-nb/stream-nb.env"]
    for key, value in [
        ("NoNewPrivileges", "yes"),
        ("ProtectSystem", "strict"),
        ("ProtectHome", "yes"),
        ("PrivateTmp", "yes"),
        ("DynamicUser", "yes"),
    ]:
        assert unit[key] == [value], key
    assert unit["ReadWritePaths"]


def test_the_environment_file_holds_real_settings(tmp_path: Path) -> None:
    """Every variable is one `stream-nb run --help` documents, and a daemon accepts the
    file's values (its source, sinks, state and port replaced by temporary ones)."""
    env = settings(ENV_FILE.read_text())
    assert all(len(values) == 1 for values in env.values())
    helptext = subprocess.run(
        [*stream_nb_command(), "run", "--help"], check=True, capture_output=True, text=True
    ).stdout
    documented = set(re.findall(r"env\s+(STREAM_NB_\w+)", helptext))
    assert set(env) <= documented, set(env) - documented
    assert env["STREAM_NB_CHECKPOINT_DIR"] == ["/var/lib/stream-nb/checkpoints"]
    assert env["STREAM_NB_METRICS_ADDRESS"][0].startswith("127.0.0.1:")

    events = subprocess.run(
        [*stream_nb_command(), "demo", "--limit", "50"], check=True, capture_output=True
    ).stdout
    (tmp_path / "events.jsonl").write_bytes(events + b"{not json\n")
    run_env = environment_with_venv() | {key: values[0] for key, values in env.items()}
    run_env |= {
        "STREAM_NB_SOURCE": "events.jsonl",
        "STREAM_NB_SINK": "predictions.jsonl",
        "STREAM_NB_DEAD_LETTERS": "dead-letters.jsonl",
        "STREAM_NB_CHECKPOINT_DIR": "checkpoints",
        "STREAM_NB_METRICS_ADDRESS": "127.0.0.1:0",
    }
    result = subprocess.run(
        [*stream_nb_command(), "run", "--report", "report.json"],
        cwd=tmp_path,
        env=run_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    # json log lines (STREAM_NB_LOG_FORMAT=json), one prediction per good event
    assert result.stderr.startswith("{"), result.stderr
    assert len((tmp_path / "predictions.jsonl").read_text().splitlines()) == 50
    assert len((tmp_path / "dead-letters.jsonl").read_text().splitlines()) == 1
    assert list((tmp_path / "checkpoints").glob("snapshot-*.json"))
