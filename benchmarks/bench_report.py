"""The HTML report on a large scored file: time, page size and memory, in the same run as the
floor any report of that file pays (reading every line with ``json.loads``, nothing else).

A synthetic scored file (default 1,000,000 rollouts in groups of 16, three components, 2%
errors, a timing per component) and a baseline of the same rollouts with a tenth of the
rewards changed are written to a temporary folder; then:

- floor: read the scored file line by line with ``json.loads`` (the peer: no checks, no
  numbers, no page);
- report: ``build_report(scored, output=...)``, split into reading, computing and drawing;
- report with ``--compare``: the same against the baseline.

Target: each page under 3 MB (exit status 1 otherwise), whatever the number of rollouts.

    python benchmarks/bench_report.py [--rollouts 1000000] [--keep DIR [--reuse]]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

from rewardsmith.report import build_report, collect, render
from rewardsmith.report.scored import read_scored

GROUP = 16
PAGE_LIMIT = 3_000_000  # bytes


def write_scored(path: Path, count: int, *, seed: int, changed: float = 0.0) -> None:
    rng = random.Random(seed)
    shift = random.Random(99)  # the same rollouts change in every call
    with path.open("w") as handle:
        for i in range(count):
            correct = float(rng.random() < 0.4)
            style = rng.choice((0.0, 0.25, 0.5, 0.75, 1.0))
            length = round(rng.random(), 3)
            timing = {"correct": rng.lognormvariate(-7, 0.6),
                      "style": rng.lognormvariate(-9, 0.4),
                      "length": rng.lognormvariate(-11, 0.3)}
            if shift.random() < changed:
                correct = 1.0 - correct
            if rng.random() < 0.02:
                line = {"id": f"r{i}", "group": f"g{i // GROUP}", "reward": None,
                        "status": "error",
                        "components": {"correct": None, "style": style, "length": length},
                        "errors": {"correct": "ValueError: unparsable answer"},
                        "advantage": None, "timing": timing}
            else:
                line = {"id": f"r{i}", "group": f"g{i // GROUP}",
                        "reward": correct + 0.2 * style + 0.1 * length, "status": "ok",
                        "components": {"correct": correct, "style": style, "length": length},
                        "errors": {}, "advantage": None, "timing": timing}
            handle.write(json.dumps(line) + "\n")


def floor(path: Path) -> float:
    started = time.perf_counter()
    with path.open("rb") as handle:
        for raw in handle:
            json.loads(raw)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=1_000_000)
    parser.add_argument("--keep", type=Path, help="write the files here and keep them")
    parser.add_argument("--reuse", action="store_true",
                        help="with --keep: use the files already there when they exist")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="bench-report-"))
    folder.mkdir(parents=True, exist_ok=True)
    scored, baseline = folder / "scored.jsonl", folder / "baseline.jsonl"
    started = time.perf_counter()
    if not (args.reuse and scored.exists() and baseline.exists()):
        write_scored(scored, args.rollouts, seed=1)
        write_scored(baseline, args.rollouts, seed=1, changed=0.1)
    print(f"{args.rollouts:,} rollouts: {scored.stat().st_size / 1e6:.0f} MB scored file "
          f"(written in {time.perf_counter() - started:.1f} s)")

    parse = floor(scored)
    started = time.perf_counter()
    columns = read_scored(scored)
    read = time.perf_counter() - started
    del columns
    started = time.perf_counter()
    data = collect(scored)
    collected = time.perf_counter() - started
    started = time.perf_counter()
    render(data)
    drawn = time.perf_counter() - started
    del data

    output = folder / "report.html"
    started = time.perf_counter()
    build_report(scored, output=output)
    total = time.perf_counter() - started
    compared_output = folder / "compare.html"
    started = time.perf_counter()
    build_report(scored, output=compared_output, compare_with=baseline)
    compared = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    print(f"{'step':<44}{'seconds':>10}{'x floor':>10}")
    rows = [("floor: json.loads every line", parse),
            ("report: read and check the scored file", read),
            ("report: read + compute (collect)", collected),
            ("report: draw the page (render)", drawn),
            ("report: build_report, written", total),
            ("report --compare baseline, written", compared)]
    for name, seconds in rows:
        print(f"{name:<44}{seconds:>10.2f}{seconds / parse:>10.2f}")
    sizes = output.stat().st_size, compared_output.stat().st_size
    print(f"page: {sizes[0] / 1e6:.2f} MB; with --compare: {sizes[1] / 1e6:.2f} MB; "
          f"peak memory {peak:,.0f} MB")
    if args.keep is None:
        for path in (scored, baseline, output, compared_output):
            path.unlink()
        folder.rmdir()
    if max(sizes) > PAGE_LIMIT:
        print(f"FAIL: a page is over {PAGE_LIMIT / 1e6:.0f} MB")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
