"""A real Prometheus for the live lab tests: gpunet's rendered configuration narrowed to the lab
servers that run an exporter, scraping every 3 s and evaluating every second, on a free loopback port."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from gpunet.lab.build import LAB_PLAN, lab_dir
from gpunet.model.io import read_plan
from gpunet.render.prometheus import render_prometheus


def rendered_config(directory: Path, lab: str, scraped: Collection[str]) -> Path:
    """The rendered files under `directory`, the gpunet job only, its targets only `scraped`."""
    for name, text in render_prometheus(read_plan(lab_dir(lab) / LAB_PLAN)).items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_text(text)
    config_path = directory / "prometheus/prometheus.yml"
    config = yaml.safe_load(config_path.read_text())
    # a scrape's timeout is its interval: 1 s read a loaded host's slower scrapes as down, no samples
    config["global"] |= {"scrape_interval": "3s", "evaluation_interval": "1s"}
    config["scrape_configs"] = [job for job in config["scrape_configs"] if job["job_name"] == "gpunet"]
    config_path.write_text(yaml.safe_dump(config))
    targets = directory / "prometheus/targets/gpunet.json"
    kept = [group for group in json.loads(targets.read_text()) if group["labels"]["node"] in scraped]
    targets.write_text(json.dumps(kept))
    return config_path


@contextmanager
def running_prometheus(config: Path, storage: Path) -> Iterator[str]:
    """Prometheus on `config` while the block runs; its API's URL. Stopped by its own PID."""
    port = _free_port()
    server = subprocess.Popen(["prometheus", f"--config.file={config}", f"--storage.tsdb.path={storage}",
                               f"--web.listen-address=127.0.0.1:{port}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield f"http://127.0.0.1:{port}/api/v1"
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# How long a live test waits for Prometheus to show what it should: a bound, not a wait (a passing
# test returns at the first answer, seconds in). Starting Prometheus and the exporter beside four
# other test workers has taken over a minute on a slow 2-core host.
PATIENCE_S = 180.0


def until(what: Callable[[], Any], seconds: float = PATIENCE_S) -> Any:
    """`what()`'s first true answer within `seconds`; an OSError is Prometheus still starting."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if found := what():
                return found
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"not within {seconds} s")
