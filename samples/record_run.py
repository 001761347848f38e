"""Record the sample agent answering every question of samples/evals.yaml.

    python samples/record_run.py                 # writes samples/runs/*.parquet
    python samples/record_run.py --broken OUT    # the regressed agent, into OUT

The model is the offline one in samples/model_server.py unless OPENAI_BASE_URL is set.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # so `samples.agent` imports when run as a script

from evaltrace.collector import record  # noqa: E402
from samples.agent import run, run_broken  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description="Record the sample agent over the sample spec.")
    parser.add_argument("out", nargs="?", default=str(HERE / "runs"), help="folder for the Parquet files")
    parser.add_argument("--broken", action="store_true", help="record the regressed agent instead")
    parser.add_argument("--spec", default=str(HERE / "evals.yaml"))
    args = parser.parse_args()
    agent = run_broken if args.broken else run
    # The SDK names the service from OTEL_SERVICE_NAME; without it every span says
    # `unknown_service:python`, which is what `evaltrace runs` would show for the samples.
    os.environ.setdefault("OTEL_SERVICE_NAME", "sample-agent")
    cases = yaml.safe_load(Path(args.spec).read_text())["cases"]
    with record(directory=args.out, run_id="sample-broken" if args.broken else "sample") as recorder:
        for case in cases:
            print(f"{case['id']}: {agent(case['input'])}")
    print(f"recorded into {recorder.directory}")


if __name__ == "__main__":
    main()
