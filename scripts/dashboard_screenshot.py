"""Render the dashboard's main queries from a real run to a PNG (docs/img/dashboard.png).

Run through ``bash scripts/dashboard-screenshot.sh`` (which installs chromium and
prometheus when missing). A ``stream-nb run --follow`` daemon reads a file that this
script grows with seeded Agrawal events for a few minutes: clean events first, then
a burst of bad lines, then a concept drift (every label flipped). Debian's Prometheus
scrapes the daemon every second with deploy/prometheus/*.yml loaded and serves the
console deploy/prometheus/consoles/stream-nb.html, which headless Chromium renders.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "deploy"))

from deploy_helpers import (  # noqa: E402 - after the path set-up above
    CONSOLES,
    JOB,
    Daemon,
    PrometheusServer,
    stream_nb_command,
    tool,
    wait_for,
)

#: Seconds of each phase, and events appended per second.
CLEAN, BAD, GAP, DRIFT = 60.0, 30.0, 20.0, 70.0
RATE = 1500
#: Share of bad lines during the bad phase, as (share, line).
BAD_LINES = [
    (0.25, b"{not json"),  # invalid_json
    (0.10, b'{"y": 1}'),  # missing_features
    (0.05, b'{"pad": "' + b"x" * 5000 + b'", "y": 0}'),  # too_large
]


def chromium_screenshot(url: str, out: Path, width: int, height: int) -> None:
    """Headless Chromium with a fresh profile, no network services, a fixed window."""
    with tempfile.TemporaryDirectory(prefix="stream-nb-chromium-") as profile:
        command = [
            tool("chromium", "chromium"),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            "--virtual-time-budget=30000",
            f"--screenshot={out}",
            url,
        ]
        result = subprocess.run(command, capture_output=True, text=True, timeout=300)
        if result.returncode != 0 or not out.exists():
            raise SystemExit(f"chromium failed ({result.returncode}):\n{result.stderr[-3000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", default=str(REPO / "docs" / "img" / "dashboard.png"))
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=1480)
    args = parser.parse_args()
    out = Path(args.out).resolve()

    workdir = Path(tempfile.mkdtemp(prefix="stream-nb-screenshot-"))
    daemon = prometheus = None
    try:
        total = int((CLEAN + BAD + GAP + DRIFT) * RATE) + RATE
        events = subprocess.run(
            [*stream_nb_command(), "demo", "--limit", str(total), "--seed", "5"],
            check=True,
            capture_output=True,
        ).stdout.splitlines()
        source = workdir / "events.jsonl"
        source.write_bytes(b"")
        daemon = Daemon(
            workdir,
            [
                *("--source", str(source), "--follow", "--sink", "/dev/null"),
                *("--dead-letters", str(workdir / "dead-letters.jsonl")),
                *("--max-line-bytes", "4096", "--window", "3000"),
                *("--checkpoint-dir", str(workdir / "checkpoints"), "--checkpoint-interval", "10"),
            ],
        ).start()
        prom_dir = workdir / "prometheus"
        prom_dir.mkdir()
        prometheus = PrometheusServer(prom_dir, [daemon.target], consoles=CONSOLES).start()
        up = f'up{{job="{JOB}"}} == 1'
        wait_for(lambda: prometheus.query(up), "Prometheus to scrape the daemon")

        print(f"feeding events for {CLEAN + BAD + GAP + DRIFT:.0f} s ...", flush=True)
        start = time.monotonic()
        index = 0
        step = 0.25
        owed = [0.0] * len(BAD_LINES)  # bad lines due, per kind
        with open(source, "ab", buffering=0) as f:
            while (elapsed := time.monotonic() - start) < CLEAN + BAD + GAP + DRIFT:
                chunk = []
                for _ in range(int(RATE * step)):
                    line = events[index]
                    index += 1
                    if elapsed >= CLEAN + BAD + GAP:  # drift: every label flipped
                        event = orjson.loads(line)
                        event["y"] = 1 - event["y"]
                        line = orjson.dumps(event)
                    chunk.append(line)
                    if CLEAN <= elapsed < CLEAN + BAD:
                        for k, (share, bad) in enumerate(BAD_LINES):
                            owed[k] += share
                            if owed[k] >= 1.0:
                                owed[k] -= 1.0
                                chunk.append(bad)
                f.write(b"\n".join(chunk) + b"\n")
                time.sleep(max(0.0, start + (elapsed // step + 1) * step - time.monotonic()))
        time.sleep(5)
        end = time.time()
        params = urllib.parse.urlencode(
            {"job": JOB, "range": int(CLEAN + BAD + GAP + DRIFT + 20), "end": int(end)}
        )
        url = f"{prometheus.url}/consoles/stream-nb.html?{params}"
        out.parent.mkdir(parents=True, exist_ok=True)
        chromium_screenshot(url, out, args.width, args.height)
        consumed = prometheus.query(f'stream_nb_events_consumed_total{{job="{JOB}"}}')
        print(f"{out}: {consumed[0]['value'][1]} events consumed", flush=True)
    finally:
        if prometheus is not None:
            prometheus.stop()
        if daemon is not None:
            daemon.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
