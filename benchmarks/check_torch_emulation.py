"""Check the float32 emulation of torch (``advantages._torchlike``, ``advantages.trainers``)
against real torch on this CPU, bit for bit.

Needs torch, which rewardsmith does not depend on: install it in a separate environment.

    python -m venv /tmp/torchenv
    /tmp/torchenv/bin/pip install torch numpy
    /tmp/torchenv/bin/pip install -e .
    /tmp/torchenv/bin/python benchmarks/check_torch_emulation.py [--seed S] [--reps R]

Each CPU capability runs in a subprocess of this script, because torch reads
``ATEN_CPU_CAPABILITY`` once, at import: the capability torch picks here, then ``avx2``
(``--capabilities`` to change). Each is checked against the lanes the emulation documents
for it (8 for AVX2 and DEFAULT, 16 for AVX-512) and, for AVX-512, against 8 lanes too.
Prints a markdown report; exits 0 when every check at the documented lanes is exact,
1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rewardsmith.advantages._torchlike import torch_mean, torch_std, torch_sum
from rewardsmith.advantages.trainers import TRAINERS, emulate_array

F32 = NDArray[np.float32]

# Lanes the emulation's docstrings give for each capability torch can report.
DOCUMENTED_LANES = {"DEFAULT": 8, "AVX2": 8, "AVX512": 16}
CONSTANTS = (0.1, 0.2, 0.3, 0.7)
KINDS = ("tenths", "uniform", "binary", "constant", "wide")
MAX_LENGTH = 70


# ---------------------------------------------------------------- comparison helpers


def same_bits(ours: object, theirs: object) -> bool:
    """Equal float32 bit patterns; any NaN equals any NaN (torch and numpy differ in sign)."""
    a = np.asarray(ours, dtype=np.float32).reshape(-1)
    b = np.asarray(theirs, dtype=np.float32).reshape(-1)
    if a.shape != b.shape:
        return False
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    if not np.array_equal(nan_a, nan_b):
        return False
    return bool(np.array_equal(a[~nan_a].view(np.uint32), b[~nan_b].view(np.uint32)))


def abs_diff(ours: object, theirs: object) -> float:
    """Largest |difference| where both are finite; inf when the NaN positions differ."""
    a = np.asarray(ours, dtype=np.float64).reshape(-1)
    b = np.asarray(theirs, dtype=np.float64).reshape(-1)
    if not np.array_equal(np.isnan(a), np.isnan(b)):
        return float("inf")
    both = np.isfinite(a) & np.isfinite(b)
    return float(np.max(np.abs(a[both] - b[both]), initial=0.0))


def ranges(values: set[int]) -> str:
    """{1, 2, 3, 7} -> '1-3, 7': mismatching lengths read better as ranges."""
    out: list[str] = []
    items = sorted(values)
    while items:
        start = end = items.pop(0)
        while items and items[0] == end + 1:
            end = items.pop(0)
        out.append(str(start) if start == end else f"{start}-{end}")
    return ", ".join(out) if out else "-"


@dataclass
class Tally:
    cases: int = 0
    exact: int = 0
    max_diff: float = 0.0
    bad_sizes: set[int] = field(default_factory=set)

    def add(self, size: int, ours: object, theirs: object) -> None:
        self.cases += 1
        if same_bits(ours, theirs):
            self.exact += 1
        else:
            self.bad_sizes.add(size)
            self.max_diff = max(self.max_diff, abs_diff(ours, theirs))

    @property
    def ok(self) -> bool:
        return self.exact == self.cases


# ---------------------------------------------------------------- inputs


def row_values(rng: np.random.Generator, kind: str, shape: tuple[int, int]) -> F32:
    """Rewards-like float32 values; 'constant' gives each row one of 0.1/0.2/0.3/0.7."""
    if kind == "tenths":
        x = rng.integers(0, 11, shape) / 10
    elif kind == "uniform":
        x = rng.random(shape)
    elif kind == "binary":
        x = rng.integers(0, 2, shape).astype(np.float64)
    elif kind == "constant":
        x = np.repeat(rng.choice(CONSTANTS, (shape[0], 1)), shape[1], axis=1)
    else:  # wide: mixed signs and magnitudes, where rounding happens at every addition
        x = rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, shape)
    return x.astype(np.float32)


def reward_batch(rng: np.random.Generator, groups: int, size: int, equal: bool) -> F32:
    """A (groups x size) batch: all groups of equal rewards, or a mix of group kinds."""
    rows = []
    for _ in range(groups):
        if equal:
            value = rng.choice((*CONSTANTS, 0.0, 1.0, float(rng.integers(0, 11)) / 10))
            rows.append(np.full(size, value, dtype=np.float32))
        else:
            kind = str(rng.choice(("constant", "tenths", "binary", "uniform")))
            rows.append(row_values(rng, kind, (1, size))[0])
    return np.stack(rows)


# ---------------------------------------------------------------- the trainers, in torch


def torch_trainers(torch: Any) -> dict[str, Callable[[Any, int], Any]]:
    """Each trainer's formula with real torch, as ``trainers``' docstrings describe it.

    The functions take the flat rewards tensor (groups contiguous, in batch order, as the
    trainers lay them out) and the group size; they return the flat advantages.
    """
    t = torch  # the module, passed in: importing this file needs no torch

    def per_group(r: Any, n: int) -> Iterator[tuple[slice, Any]]:
        for start in range(0, r.numel(), n):
            part = slice(start, start + n)
            yield part, r[part]

    def verl(r: Any, n: int) -> Any:
        # One group at a time: torch.mean / torch.std of the stacked scores (one output).
        out = t.empty_like(r)
        for part, s in per_group(r, n):
            if n == 1:
                mean, std = t.tensor(0.0), t.tensor(1.0)
            else:
                mean, std = t.mean(s), t.std(s)
            out[part] = (s - mean) / (std + 1e-6)
        return out

    def trl(scale: str) -> Callable[[Any, int], Any]:
        def run(r: Any, n: int) -> Any:
            grouped = r.view(-1, n)
            mean = grouped.mean(dim=1).repeat_interleave(n, dim=0)
            advantages = r - mean
            if scale == "none":
                return advantages
            if scale == "batch":
                std = r.std().expand_as(r)
            else:
                std = grouped.std(dim=1).repeat_interleave(n, dim=0)
            return advantages / (std + 1e-4)

        return run

    def slime(r: Any, n: int) -> Any:
        grouped = r.view(-1, n)
        centered = grouped - grouped.mean(dim=-1, keepdim=True)
        return (centered / (centered.std(dim=-1, keepdim=True) + 1e-6)).reshape(-1)

    def miles(r: Any, n: int) -> Any:
        # Per group, like verl; groups with std 0 (or NaN, a singleton) are only centered.
        out = t.empty_like(r)
        for part, s in per_group(r, n):
            centered = s - s.mean()
            std = s.std()
            out[part] = centered / (std + 1e-6) if bool(std > 0) else centered
        return out

    def openrlhf(r: Any, n: int) -> Any:
        grouped = r.view(-1, n)
        scaled = (grouped - grouped.mean(-1, keepdim=True)) / (grouped.std(-1, keepdim=True) + 1e-9)
        return scaled.reshape(-1)

    def nemo(r: Any, n: int) -> Any:
        # Leave-one-out mean and mean square by a (1 - eye) matmul per group, then
        # std = sqrt(E[x^2] - E[x]^2) with NaN -> 0, divided only where std > 0.
        baseline = t.zeros_like(r)
        square = t.zeros_like(r)
        valid = t.ones_like(r)
        for part, s in per_group(r, n):
            if valid[part].sum() <= 1:
                baseline[part] = s
                continue
            others = valid[part].sum() - 1
            keep = 1 - t.eye(n)
            baseline[part] = t.matmul(keep, s * valid[part]) / others
            square[part] = t.matmul(keep, t.pow(s, 2) * valid[part]) / others
        std = (square - baseline.square()).sqrt().nan_to_num(0)
        advantages = r - baseline
        spread = std > 0
        advantages[spread] = advantages[spread] / (std[spread] + 1e-6)
        return advantages

    return {
        "verl": verl,
        "trl": trl("group"),
        "trl scale=batch": trl("batch"),
        "trl scale=none": trl("none"),
        "slime": slime,
        "miles": miles,
        "openrlhf": openrlhf,
        "nemo": nemo,
    }


# ---------------------------------------------------------------- one capability (child)


def check_reductions(
    torch: Any, lanes_list: list[int], reps: int, seed: int
) -> dict[str, dict[int, Tally]]:
    """Each reduction against the emulation, per lanes setting."""
    t = torch
    rng = np.random.default_rng(seed)
    ops: dict[str, dict[int, Tally]] = {}

    def record(name: str, lanes: int, size: int, ours: object, theirs: object) -> None:
        ops.setdefault(name, {}).setdefault(lanes, Tally()).add(size, ours, theirs)

    for size in range(1, MAX_LENGTH + 1):
        for kind in KINDS:
            for _ in range(reps):
                batch = int(rng.integers(2, 7))  # >= 2 rows: std along dim takes Welford
                x = row_values(rng, kind, (batch, size))
                wide = x.astype(np.float64)
                tx = t.from_numpy(x)
                tw = t.from_numpy(wide)
                sums = tx.sum(dim=1).numpy()
                sum_one = tx[0].sum().numpy()
                means = tx.mean(dim=1).numpy()
                mean_one = tx[0].mean().numpy()
                std_one = tx[0].std().numpy()
                std_one_row = tx[:1].std(dim=1).numpy()  # dim reduction, but one output
                std_dim = tx.std(dim=1).numpy()
                sums64 = tw.sum(dim=1).numpy().astype(np.float32)
                for lanes in lanes_list:
                    record("sum: t.sum(dim=1)", lanes, size, torch_sum(x, lanes=lanes), sums)
                    record("sum: t.sum(), 1-D", lanes, size, torch_sum(x[0], lanes=lanes), sum_one)
                    record("mean: t.mean(dim=1)", lanes, size, torch_mean(x, lanes=lanes), means)
                    record(
                        "mean: t.mean(), 1-D", lanes, size, torch_mean(x[0], lanes=lanes), mean_one
                    )
                    std_emulated = torch_std(x[:1], one_output=True, lanes=lanes)
                    record("std one output: t.std(), 1-D", lanes, size, std_emulated, std_one)
                    record(
                        "std one output: (1 x N).std(dim=1)", lanes, size, std_emulated, std_one_row
                    )
                    record(
                        "std along dim: (B x N).std(dim=1), B >= 2",
                        lanes,
                        size,
                        torch_std(x, one_output=False, lanes=lanes),
                        std_dim,
                    )
                    # float64 checks the half-width rule (a register holds lanes / 2 doubles);
                    # compared after rounding to float32, exact float64 bits are not claimed.
                    ours64 = torch_sum(wide, lanes=lanes // 2).astype(np.float32)
                    record("sum float64 (lanes / 2), as float32", lanes, size, ours64, sums64)
    return ops


def check_trainers(
    torch: Any, lanes_list: list[int], reps: int, seed: int
) -> dict[str, dict[int, Tally]]:
    """Each trainer's torch formula against ``emulate_array``, per lanes setting."""
    t = torch
    rng = np.random.default_rng(seed + 1)
    formulas = torch_trainers(torch)
    emulated = [name for name, spec in TRAINERS.items() if spec.rows is not None]
    missing = sorted(set(emulated) - {name.split()[0] for name in formulas})
    if missing:  # a trainer added to TRAINERS without a torch formula here
        raise SystemExit(f"no torch formula for trainer(s): {', '.join(missing)}")
    out: dict[str, dict[int, Tally]] = {}
    for size in range(1, 65):
        for equal in (True, False):
            for groups in (1, 0):
                for _ in range(reps):
                    count = groups or int(rng.integers(2, 9))
                    x = reward_batch(rng, count, size, equal)
                    flat = x.reshape(-1)
                    codes = np.repeat(np.arange(count), size)
                    tx = t.from_numpy(flat.copy())
                    for label, formula in formulas.items():
                        name, _, option = label.partition(" scale=")
                        theirs = formula(tx.clone(), size).numpy()
                        for lanes in lanes_list:
                            ours = emulate_array(
                                flat, codes, trainer=name, scale=option or None, lanes=lanes
                            ).astype(np.float32)
                            out.setdefault(label, {}).setdefault(lanes, Tally()).add(
                                size, ours, theirs
                            )
    return out


def table(
    title: str, results: dict[str, dict[int, Tally]], lanes_list: list[int], size_word: str
) -> list[str]:
    head = "| check | " + " | ".join(f"exact, lanes={n}" for n in lanes_list)
    head += " | " + " | ".join(f"max abs diff, lanes={n}" for n in lanes_list)
    head += f" | {size_word} with a mismatch, lanes={lanes_list[-1]} |"
    lines = [f"#### {title}", "", head, "|" + " --- |" * (2 * len(lanes_list) + 2)]
    for name, per_lanes in results.items():
        cells = [f"{per_lanes[n].exact}/{per_lanes[n].cases}" for n in lanes_list]
        cells += [f"{per_lanes[n].max_diff:.3g}" for n in lanes_list]
        cells.append(ranges(per_lanes[lanes_list[-1]].bad_sizes))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def child(args: argparse.Namespace) -> int:
    import torch  # here, after the parent has set ATEN_CPU_CAPABILITY

    warnings.filterwarnings("ignore")  # std of one element: "degrees of freedom is <= 0"
    torch.set_num_threads(1)  # small inputs run on one thread anyway; keep it so
    capability = torch.backends.cpu.get_cpu_capability()
    documented = DOCUMENTED_LANES.get(capability, 8)
    lanes_list = sorted({8, documented})
    reductions = check_reductions(torch, lanes_list, args.reps, args.seed)
    trainers = check_trainers(torch, lanes_list, max(1, args.reps // 4), args.seed)
    requested = os.environ.get("ATEN_CPU_CAPABILITY", "(unset)")
    lines = [
        f"### ATEN_CPU_CAPABILITY={requested}: "
        f"torch.backends.cpu.get_cpu_capability() = {capability}",
        "",
        f"Documented emulation lanes for {capability}: {documented}. "
        f"torch {torch.__version__}, float32 unless noted; inputs of length 1-{MAX_LENGTH}.",
        "",
        *table("Reductions", reductions, lanes_list, "row lengths"),
        *table(
            "Trainers (emulate_array vs the torch formula)", trainers, lanes_list, "group sizes"
        ),
    ]
    failed = [
        name
        for results in (reductions, trainers)
        for name, per_lanes in results.items()
        if not per_lanes[documented].ok
    ]
    verdict = "all exact" if not failed else "MISMATCH in " + "; ".join(failed)
    lines.append(f"**{capability} at lanes={documented}: {verdict}**")
    print("\n".join(lines))
    return 1 if failed else 0


# ---------------------------------------------------------------- parent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=20240611)
    parser.add_argument("--reps", type=int, default=8, help="random inputs per length and kind")
    parser.add_argument(
        "--capabilities",
        default="native,avx2",
        help="comma-separated ATEN_CPU_CAPABILITY values; 'native' leaves it unset",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)

    print("## torch emulation check (rewardsmith.advantages._torchlike / trainers)\n")
    status = 0
    for capability in args.capabilities.split(","):
        env = dict(os.environ)
        env.pop("ATEN_CPU_CAPABILITY", None)
        if capability != "native":
            env["ATEN_CPU_CAPABILITY"] = capability
        command = [sys.executable, os.path.abspath(__file__), "--child"]
        command += ["--seed", str(args.seed), "--reps", str(args.reps)]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        print(done.stdout)
        if done.returncode not in (0, 1):  # a crash, not a mismatch: show why
            print(f"child for {capability} failed ({done.returncode}):\n{done.stderr}")
        status = max(status, 1 if done.returncode else 0)
    print(
        f"exit status {status}: " + ("everything matched exactly" if not status else "mismatches")
    )
    return status


if __name__ == "__main__":
    sys.exit(main())
