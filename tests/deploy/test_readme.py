"""The README's claims: its daemon quick start, run as it stands in a temporary
directory, and its learner count.

The one change to the quick start is the metrics port: the block's ``9108`` becomes a
free port, so the test never meets another program on it. The commands come from the
project's virtualenv, as after the README's install command. (The Kafka quick start
runs in test_kafka_local.py.)
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from deploy_helpers import REPO, environment_with_venv, free_port

import stream_nb

README = REPO / "README.md"
LEARNERS_DOC = REPO / "docs" / "learners.md"
NUMBER_WORDS = {9: "nine", 10: "ten", 11: "eleven", 12: "twelve", 13: "thirteen", 14: "fourteen"}


def test_the_learner_count_matches_the_code() -> None:
    """The README and docs/learners.md name as many learners as stream_nb exports."""
    learners = [
        name
        for name in stream_nb.__all__
        if isinstance(getattr(stream_nb, name), type)
        and issubclass(getattr(stream_nb, name), stream_nb.Learner)
        and getattr(stream_nb, name) is not stream_nb.Learner
    ]
    word = NUMBER_WORDS[len(learners)]
    readme = README.read_text()
    assert f"**{word.capitalize()} learners**" in readme
    assert f"The {word} learners of `stream_nb`" in LEARNERS_DOC.read_text()
    for name in learners:
        assert f"`{name}`" in readme, f"the README's learner list lacks {name}"


def daemon_quick_start() -> str:
    """The bash block after ``<!-- daemon quick start -->`` in the README."""
    match = re.search(
        r"<!-- daemon quick start -->\n```bash\n(.*?)```", README.read_text(), re.DOTALL
    )
    assert match is not None, "README.md lost its daemon quick start block"
    return match[1]


def test_the_daemon_quick_start_runs_as_documented(tmp_path: Path) -> None:
    block = daemon_quick_start()
    assert block.count("9108") == 2  # the flag and the scrape
    port = free_port()
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.replace("9108", str(port))],
        cwd=tmp_path,
        env=environment_with_venv(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    # the scrape: the first run's counters, served on 127.0.0.1
    assert 'stream_nb_events_processed_total{outcome="learned"}' in result.stdout
    # one record per input line: 30,000 events and the broken line
    events = (tmp_path / "events.jsonl").read_bytes().splitlines()
    predictions = [json.loads(line) for line in (tmp_path / "predictions.jsonl").open()]
    dead = [json.loads(line) for line in (tmp_path / "dead.jsonl").open()]
    assert (len(events), len(predictions), len(dead)) == (30_001, 30_000, 1)
    assert dead[0]["reason"] == "invalid_json"
    lines = [p["position"]["line"] for p in predictions] + [dead[0]["position"]["line"]]
    assert sorted(lines) == list(range(1, 30_002))
    # the restart resumed after the snapshot: nothing learned twice
    assert predictions[-1]["n_learned"] == 29_999
    assert '"n_learned": 30000' in result.stdout  # inspect of the last snapshot
    assert "restored snapshot" in result.stderr
