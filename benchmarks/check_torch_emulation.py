"""Check the torch emulation (``advantages._torchlike``, ``advantages.trainers``) against
real torch on this CPU, bit for bit.

Needs torch, which rewardsmith does not depend on: install it in a separate environment.

    python -m venv /tmp/torchenv
    /tmp/torchenv/bin/pip install torch numpy
    /tmp/torchenv/bin/pip install -e .
    /tmp/torchenv/bin/python benchmarks/check_torch_emulation.py [--seed S] [--reps R]

torch reads ``ATEN_CPU_CAPABILITY`` once, when it is imported, so each capability runs in
a subprocess of this script: the one torch picks here, then ``avx2`` (``--capabilities``).
Each is compared with the emulation at 8 float32 lanes, the order of torch's CPU sums on
every x86 build (AVX-512 included: torch has no AVX-512 sum kernel), and with ``--lanes``
more when given.

NeMo's advantages take a square root, which torch hands to MKL (``vsSqrt``): within an ulp
of the correctly rounded one numpy gives, not always equal. So NeMo is checked twice: with
torch's own sqrt, where every advantage must be within 2 ulps (its summation order shows in
far larger differences), and with numpy's sqrt put into the torch formula, where it must be
exact.

Prints a markdown report. Exit status 0 when every check passes at 8 lanes, 1 otherwise.
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

Floats = NDArray[np.floating]
Results = dict[str, dict[int, "Tally"]]
Formula = Callable[[Any, int], Any]

CONSTANTS = (0.1, 0.2, 0.3, 0.7)
KINDS = ("tenths", "uniform", "binary", "constant", "wide")
MAX_LENGTH = 70  # row lengths 1..70: around 8, 16, 32 and 64-element vectors and blocks
MAX_GROUP = 64
NEAR = "(within 2 ulps)"  # rows that may differ by torch's sqrt rounding


# ---------------------------------------------------------------- comparison


def same_bits(ours: Any, theirs: Any) -> bool:
    """Equal bit patterns in the dtype of ``theirs`` (torch's); any NaN equals any NaN,
    since the sign of a NaN differs between torch and numpy and means nothing here."""
    b = np.asarray(theirs).reshape(-1)
    a = np.asarray(ours).astype(b.dtype).reshape(-1)
    if a.shape != b.shape:
        return False
    nan_a, nan_b = np.isnan(a), np.isnan(b)
    if not np.array_equal(nan_a, nan_b):
        return False
    bits = np.uint64 if b.dtype == np.float64 else np.uint32
    return bool(np.array_equal(a[~nan_a].view(bits), b[~nan_b].view(bits)))


def abs_diff(ours: Any, theirs: Any) -> float:
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


def within_ulps(ours: Any, theirs: Any, ulps: int) -> bool:
    """Every value within ``ulps`` units in the last place of torch's (same NaN positions)."""
    b = np.asarray(theirs).reshape(-1)
    a = np.asarray(ours).astype(b.dtype).reshape(-1)
    if a.shape != b.shape or not np.array_equal(np.isnan(a), np.isnan(b)):
        return False
    finite = ~np.isnan(b)
    a, b = a[finite], b[finite]
    unit = np.spacing(np.maximum(np.abs(a), np.abs(b)))
    return bool(np.all(np.abs(a - b) <= ulps * unit))


@dataclass
class Tally:
    ulps: int = 0  # 0: bit for bit
    cases: int = 0
    exact: int = 0
    near: int = 0  # not exact, within ``ulps``
    max_diff: float = 0.0
    bad_sizes: set[int] = field(default_factory=set)

    def add(self, size: int, ours: Any, theirs: Any) -> None:
        self.cases += 1
        if same_bits(ours, theirs):
            self.exact += 1
            return
        self.max_diff = max(self.max_diff, abs_diff(ours, theirs))
        if self.ulps and within_ulps(ours, theirs, self.ulps):
            self.near += 1
        else:
            self.bad_sizes.add(size)

    @property
    def ok(self) -> bool:
        return self.exact + self.near == self.cases


def record(results: Results, name: str, lanes: int, size: int, ours: Any, theirs: Any) -> None:
    tally = Tally(ulps=2 if NEAR in name else 0)
    results.setdefault(name, {}).setdefault(lanes, tally).add(size, ours, theirs)


# ---------------------------------------------------------------- inputs


def row_values(rng: np.random.Generator, kind: str, shape: tuple[int, int]) -> Floats:
    """Rewards-like float32 values; 'constant' gives each row one of 0.1/0.2/0.3/0.7."""
    if kind == "tenths":
        x = rng.integers(0, 11, shape) / 10
    elif kind == "uniform":
        x = rng.random(shape)
    elif kind == "binary":
        x = rng.integers(0, 2, shape).astype(np.float64)
    elif kind == "constant":
        x = np.repeat(rng.choice(CONSTANTS, (shape[0], 1)), shape[1], axis=1)
    else:  # wide: mixed signs and magnitudes, so that most additions round
        x = rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, shape)
    return x.astype(np.float32)


def reward_batch(rng: np.random.Generator, groups: int, size: int, equal: bool) -> Floats:
    """A (groups x size) batch: every group of equal rewards, or a mix of group kinds."""
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


def torch_trainers(t: Any) -> dict[str, Formula]:
    """Each trainer's formula with real torch, as ``trainers``' docstrings describe it.

    ``t`` is the torch module (passed in: importing this file needs no torch). Each function
    takes the flat rewards tensor (groups contiguous, in batch order, as the trainers lay
    them out) and the group size, and returns the flat advantages.
    """

    def per_group(r: Any, n: int) -> Iterator[tuple[slice, Any]]:
        for start in range(0, r.numel(), n):
            part = slice(start, start + n)
            yield part, r[part]

    def verl(r: Any, n: int) -> Any:
        # One group at a time: torch.mean / torch.std of the stacked scores (one output).
        out = t.empty_like(r)
        for part, s in per_group(r, n):
            if n == 1:
                mean, std = t.tensor(0.0, dtype=r.dtype), t.tensor(1.0, dtype=r.dtype)
            else:
                mean, std = t.mean(s), t.std(s)
            out[part] = (s - mean) / (std + 1e-6)
        return out

    def trl(scale: str) -> Formula:
        def run(r: Any, n: int) -> Any:
            grouped = r.view(-1, n)
            advantages = r - grouped.mean(dim=1).repeat_interleave(n, dim=0)
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
        # Per group, like verl; a group whose std is 0 (or NaN: one rollout) is only centered.
        out = t.empty_like(r)
        for part, s in per_group(r, n):
            centered = s - s.mean()
            std = s.std()
            out[part] = centered / (std + 1e-6) if bool(std > 0) else centered
        return out

    def openrlhf(r: Any, n: int) -> Any:
        grouped = r.view(-1, n)
        std = grouped.std(-1, keepdim=True)
        return ((grouped - grouped.mean(-1, keepdim=True)) / (std + 1e-9)).reshape(-1)

    def nemo(sqrt: Callable[[Any], Any]) -> Formula:
        def run(r: Any, n: int) -> Any:
            # Leave-one-out mean and mean square by a (1 - eye) matmul per group, then
            # std = sqrt(E[x^2] - E[x]^2) with NaN -> 0, dividing only where std > 0.
            baseline, square, valid = t.zeros_like(r), t.zeros_like(r), t.ones_like(r)
            for part, s in per_group(r, n):
                if valid[part].sum() <= 1:
                    baseline[part] = s
                    continue
                others = valid[part].sum() - 1
                keep = 1 - t.eye(n, dtype=r.dtype)
                baseline[part] = t.matmul(keep, s * valid[part]) / others
                square[part] = t.matmul(keep, t.pow(s, 2) * valid[part]) / others
            std = sqrt(square - baseline.square()).nan_to_num(0)
            advantages = r - baseline
            spread = std > 0
            advantages[spread] = advantages[spread] / (std[spread] + 1e-6)
            return advantages

        return run

    def ieee_sqrt(v: Any) -> Any:
        # numpy's sqrt is correctly rounded; torch's float sqrt goes to MKL's vsSqrt/vdSqrt
        return t.from_numpy(np.sqrt(v.numpy()))

    return {
        "verl": verl,
        "trl": trl("group"),
        "trl scale=batch": trl("batch"),
        "trl scale=none": trl("none"),
        "slime": slime,
        "miles": miles,
        "openrlhf": openrlhf,
        f"nemo {NEAR}": nemo(lambda v: v.sqrt()),
        "nemo, numpy's sqrt in the torch formula": nemo(ieee_sqrt),
    }


# ---------------------------------------------------------------- one capability (child)


def check_reductions(t: Any, lanes_list: list[int], reps: int, seed: int) -> Results:
    """Each reduction against the emulation, per lanes setting."""
    rng = np.random.default_rng(seed)
    out: Results = {}
    for size in range(1, MAX_LENGTH + 1):
        for kind in KINDS:
            for _ in range(reps):
                batch = int(rng.integers(2, 7))  # >= 2 rows: std along dim takes Welford
                x = row_values(rng, kind, (batch, size))
                wide = x.astype(np.float64) * 1.1  # * 1.1: not float32 values any more
                tx, tw = t.from_numpy(x), t.from_numpy(wide)
                theirs = {
                    "sum: (B x N).sum(dim=1)": tx.sum(dim=1),
                    "sum: t.sum(), 1-D": tx[0].sum(),
                    "mean: (B x N).mean(dim=1)": tx.mean(dim=1),
                    "mean: t.mean(), 1-D": tx[0].mean(),
                    "std, one output: t.std(), 1-D": tx[0].std(),
                    "std, one output: (1 x N).std(dim=1)": tx[:1].std(dim=1),
                    "std along dim: (B x N).std(dim=1), B >= 2": tx.std(dim=1),
                    "sum float64: (B x N).sum(dim=1), lanes / 2": tw.sum(dim=1),
                    "std float64, one output: t.std(), 1-D": tw[0].std(),
                }
                for lanes in lanes_list:
                    one_std = torch_std(x[:1], one_output=True, lanes=lanes)
                    ours = {
                        "sum: (B x N).sum(dim=1)": torch_sum(x, lanes=lanes),
                        "sum: t.sum(), 1-D": torch_sum(x[0], lanes=lanes),
                        "mean: (B x N).mean(dim=1)": torch_mean(x, lanes=lanes),
                        "mean: t.mean(), 1-D": torch_mean(x[0], lanes=lanes),
                        "std, one output: t.std(), 1-D": one_std,
                        "std, one output: (1 x N).std(dim=1)": one_std,
                        "std along dim: (B x N).std(dim=1), B >= 2": torch_std(
                            x, one_output=False, lanes=lanes
                        ),
                        # a register holds half as many doubles as floats
                        "sum float64: (B x N).sum(dim=1), lanes / 2": torch_sum(
                            wide, lanes=lanes // 2
                        ),
                        "std float64, one output: t.std(), 1-D": torch_std(
                            wide[:1], one_output=True, lanes=lanes // 2
                        ),
                    }
                    for name, value in theirs.items():
                        record(out, name, lanes, size, ours[name], value.numpy())
    return out


def check_trainers(
    t: Any, lanes_list: list[int], reps: int, seed: int, dtypes: list[str]
) -> Results:
    """Each trainer's torch formula against ``emulate_array``, per dtype and lanes."""
    rng = np.random.default_rng(seed + 1)
    formulas = torch_trainers(t)
    emulated = {name for name, spec in TRAINERS.items() if spec.rows is not None}
    missing = sorted(emulated - {label.split()[0].rstrip(",") for label in formulas})
    if missing:  # a trainer added to TRAINERS without a torch formula here
        raise SystemExit(f"no torch formula for trainer(s): {', '.join(missing)}")
    out: Results = {}
    for size in range(1, MAX_GROUP + 1):
        for equal in (True, False):
            for groups in (1, 0):  # one group (a one-row tensor), or 2-8 groups
                for _ in range(reps):
                    batch = reward_batch(rng, groups or int(rng.integers(2, 9)), size, equal)
                    codes = np.repeat(np.arange(batch.shape[0]), size)
                    for dtype in dtypes:
                        flat = batch.reshape(-1).astype(dtype)
                        for label, formula in formulas.items():
                            name = label.split()[0].rstrip(",")
                            scale = label.partition("scale=")[2] or None
                            theirs = formula(t.from_numpy(flat.copy()), size).numpy()
                            row = label if dtype == "float32" else f"{label}, {dtype}"
                            for lanes in lanes_list:
                                ours = emulate_array(
                                    flat, codes, trainer=name, scale=scale, dtype=dtype,
                                    lanes=lanes,
                                )  # fmt: skip
                                record(out, row, lanes, size, ours, theirs)
    return out


def table(title: str, results: Results, lanes_list: list[int], word: str) -> list[str]:
    last = lanes_list[-1]
    head = "| check | " + " | ".join(f"exact (+ near), lanes={n}" for n in lanes_list)
    head += " | " + " | ".join(f"max abs diff, lanes={n}" for n in lanes_list)
    head += f" | {word} with a mismatch, lanes={last} |"
    lines = [f"#### {title}", "", head, "|" + " --- |" * (2 * len(lanes_list) + 2)]
    for name, per_lanes in results.items():
        cells = [f"{per_lanes[n].exact}/{per_lanes[n].cases}"
                 + (f" (+{per_lanes[n].near})" if per_lanes[n].near else "")
                 for n in lanes_list]
        cells += [f"{per_lanes[n].max_diff:.3g}" for n in lanes_list]
        cells.append(ranges(per_lanes[last].bad_sizes))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def child(args: argparse.Namespace) -> int:
    import torch  # only here: the parent has set ATEN_CPU_CAPABILITY for this process

    warnings.filterwarnings("ignore")  # std of one element: "degrees of freedom is <= 0"
    torch.set_num_threads(1)  # these sizes run on one thread anyway; keep it so
    capability = torch.backends.cpu.get_cpu_capability()
    documented = 8  # torch's sum order on every x86 build
    lanes_list = sorted({documented, *args.lanes})
    reductions = check_reductions(torch, lanes_list, args.reps, args.seed)
    dtypes = args.trainer_dtypes.split(",")
    trainers = check_trainers(torch, lanes_list, max(1, args.reps // 4), args.seed, dtypes)
    requested = os.environ.get("ATEN_CPU_CAPABILITY", "unset")
    lines = [
        f"### ATEN_CPU_CAPABILITY {requested}: "
        f"`torch.backends.cpu.get_cpu_capability()` = {capability}",
        "",
        f"torch {torch.__version__}, numpy {np.__version__}; float32 unless noted. "
        f"Held to lanes={documented}.",
        "",
        *table(f"Reductions, rows of 1-{MAX_LENGTH}", reductions, lanes_list, "row lengths"),
        *table(
            f"Trainers: emulate_array vs the torch formula, groups of 1-{MAX_GROUP}",
            trainers,
            lanes_list,
            "group sizes",
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
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=20240611)
    parser.add_argument("--reps", type=int, default=8, help="inputs per row length and kind")
    parser.add_argument(
        "--capabilities",
        default="native,avx2",
        help="comma-separated ATEN_CPU_CAPABILITY values; 'native' leaves it unset",
    )
    parser.add_argument(
        "--lanes",
        type=int,
        nargs="*",
        default=[],
        help="other lane counts to report beside 8 (for comparison only)",
    )
    parser.add_argument("--trainer-dtypes", default="float32,float64")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)

    print("## torch emulation check (rewardsmith.advantages._torchlike, trainers)\n")
    status = 0
    for capability in args.capabilities.split(","):
        env = dict(os.environ)
        env.pop("ATEN_CPU_CAPABILITY", None)
        if capability != "native":
            env["ATEN_CPU_CAPABILITY"] = capability
        command = [sys.executable, os.path.abspath(__file__), "--child", "--seed", str(args.seed)]
        command += ["--reps", str(args.reps), "--lanes", *map(str, args.lanes)]
        command += ["--trainer-dtypes", args.trainer_dtypes]
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        print(done.stdout)
        if done.returncode not in (0, 1):  # a crash, not a mismatch: show why
            print(f"the check under {capability} failed ({done.returncode}):\n{done.stderr}")
        status = max(status, 1 if done.returncode else 0)
    print(f"exit status {status}: " + ("all exact" if status == 0 else "mismatches above"))
    return status


if __name__ == "__main__":
    sys.exit(main())
