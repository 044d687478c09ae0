"""Math answer checking: accuracy and speed of ``rewardsmith.mathcheck`` vs math-verify 0.9.0.

Same run, distinct pairs only (math-verify caches repeated inputs, which makes repeated-pair
benchmarks look ~10x faster than real use):

1. Accuracy on our labeled set ``tests/data/math_equivalence.jsonl``, per category.
2. Accuracy on the cases other graders' test suites assert (``tests/data/math_peer_cases.jsonl``:
   Math-Verify, hendrycks/math, NeMo-Skills, verl, Qwen2.5-Math, MARIO_EVAL, and lighteval's
   multilingual extraction tests), per source. Cases marked
   ``policy`` are verdicts we decided against (docs/math.md); they count as misses here.
3. Throughput on a seeded realistic mix of completions (about 70% integers and simple
   fractions, 30% symbolic answers: roots, pi, polynomials, intervals, sets, equations).

Targets (exit status 0 when all hold): no false positive on our set nor, outside the documented
policies, on the peer set; on the peer set at least math-verify's agreement on every source but
Math-Verify's own suite, and at least 97% on that suite; at least 40x math-verify's pairs per
second; no call of ours past its timeout.

math-verify is a benchmark-only dependency (``pip install 'rewardsmith[bench]'``). Its
timeouts use ``signal.alarm``, so it runs on the main thread of a child process; some inputs
hang past its own timeout, so the parent kills a child that is silent for ``--hang`` seconds
and counts that pair as wrong. Bare answers (no ``$``, no box, no prose) are wrapped in
``$...$`` for math-verify, which only extracts LaTeX from math delimiters.

    python benchmarks/bench_math.py [--pairs 1000] [--timeout 5] [--hang 20]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import re
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "math_equivalence.jsonl"
PEER = ROOT / "tests" / "data" / "math_peer_cases.jsonl"
MATH_VERIFY = "huggingface/Math-Verify"
_PROSE = re.compile(r"(?<![\\a-zA-Z])[a-zA-Z]{3,}")

Pair = tuple[str, str]  # (reference, completion)


# ---------------------------------------------------------------- the realistic mix


def _spell_int(rng: random.Random, n: int) -> str:
    choice = rng.randrange(4)
    if choice == 0 and abs(n) >= 1000:
        return f"{n:,}"
    if choice == 1:
        return f"{n}.0"
    return str(n)


def _fraction_pair(rng: random.Random) -> Pair:
    a, b = rng.randint(1, 99), rng.randint(2, 99)
    ref = f"\\frac{{{a}}}{{{b}}}"
    if rng.random() < 0.4:
        a += rng.choice([-1, 1]) or 1  # wrong
    k = rng.randint(1, 3)
    spelled = rng.choice([f"\\frac{{{a}}}{{{b}}}", f"\\dfrac{{{a}}}{{{b}}}", f"{a}/{b}",
                          f"\\frac{{{a * k}}}{{{b * k}}}"])
    return ref, spelled


def _symbolic_pair(rng: random.Random) -> Pair:
    a, b, c = rng.randint(1, 30), rng.randint(2, 30), rng.randint(2, 9)
    wrong = rng.random() < 0.4
    kind = rng.randrange(7)
    if kind == 0:  # polynomial, expanded vs factored
        ref = f"x^2+{a + b}x+{a * b}"
        ans = f"(x+{a})(x+{b + (1 if wrong else 0)})"
    elif kind == 1:  # roots
        ref = f"{c}\\sqrt{{{b}}}"
        ans = f"\\sqrt{{{c * c * b + (1 if wrong else 0)}}}"
    elif kind == 2:  # pi
        ref = f"\\frac{{{a}\\pi}}{{{b}}}"
        ans = f"\\frac{{{a}}}{{{b + (1 if wrong else 0)}}}\\pi"
    elif kind == 3:  # intervals
        lo, hi = -a, b
        ref = f"({lo}, {hi}]"
        ans = f"({lo}, {hi})" if wrong else f"\\left({lo}, {hi}\\right]"
    elif kind == 4:  # sets, order-free
        ref = f"\\{{{a}, {b}, {c}\\}}"
        ans = f"\\{{{c}, {a}, {b + (100 if wrong else 0)}\\}}"
    elif kind == 5:  # lines
        ref = f"y = {c}x + {a}"
        ans = f"{c}x - y + {a + (1 if wrong else 0)} = 0"
    else:  # rational expressions
        ref = f"\\frac{{{a}}}{{x+{b}}}"
        ans = f"\\frac{{{2 * a}}}{{2x+{2 * b + (1 if wrong else 0)}}}"
    return ref, ans


def realistic_mix(count: int, seed: int = 7) -> list[Pair]:
    """Distinct (reference, completion) pairs: ~70% integers and fractions, ~30% symbolic."""
    rng = random.Random(seed)
    pairs: list[Pair] = []
    seen: set[Pair] = set()
    while len(pairs) < count:
        roll = rng.random()
        if roll < 0.45:
            n = rng.randint(-5000, 100_000)
            guess = n if rng.random() < 0.6 else n + rng.choice([-10, -1, 1, 2])
            ref, ans = str(n), _spell_int(rng, guess)
        elif roll < 0.70:
            ref, ans = _fraction_pair(rng)
        else:
            ref, ans = _symbolic_pair(rng)
        steps = " ".join(f"Step {k}: combine {rng.randint(1, 999)} and {rng.randint(1, 99)}."
                         for k in range(rng.randint(2, 5)))
        completion = f"{steps}\nTherefore, the final answer is $\\boxed{{{ans}}}$."
        if (ref, completion) not in seen:
            seen.add((ref, completion))
            pairs.append((ref, completion))
    return pairs


# ---------------------------------------------------------------- math-verify, in a child


def _wrap(text: str) -> str:
    if "$" in text or "\\boxed" in text or "\\(" in text or "\\[" in text:
        return text
    if "\n" in text or _PROSE.search(re.sub(r"\\[a-zA-Z]+\{[^{}]*\}", " ", text)):
        return text  # prose: math-verify extracts from it as it is
    return f"${text}$"


def _math_verify_child(conn: Any, pairs: list[Pair]) -> None:
    from math_verify import parse, verify

    for ref, completion in pairs:
        start = time.perf_counter()
        try:
            ok = bool(verify(parse(_wrap(ref)), parse(_wrap(completion))))
        except Exception:  # noqa: BLE001 - math-verify's failure is a wrong answer
            ok = False
        conn.send((ok, time.perf_counter() - start))
    conn.send(None)


def run_math_verify(pairs: list[Pair], hang: float) -> list[tuple[bool | None, float]]:
    """(verdict, seconds) per pair; verdict None for a pair that hung (the child is killed)."""
    ctx = multiprocessing.get_context("spawn")
    results: list[tuple[bool | None, float]] = []
    while len(results) < len(pairs):
        todo = pairs[len(results):]
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_math_verify_child, args=(child, todo), daemon=True)
        proc.start()
        child.close()
        first = True
        while True:
            # The first answer also waits for the import of math-verify (sympy, antlr).
            if not parent.poll(hang + (30 if first else 0)):
                results.append((None, hang))  # hung: counted as wrong
                proc.kill()
                break
            first = False
            message = parent.recv()
            if message is None:
                break
            results.append(message)
        proc.join(timeout=5)
    return results


# ---------------------------------------------------------------- ours


def run_ours(pairs: list[Pair], timeout: float) -> list[tuple[Any, float]]:
    from rewardsmith.mathcheck import math_equal

    out = []
    for ref, completion in pairs:
        start = time.perf_counter()
        verdict = math_equal(completion, ref, timeout=timeout)
        out.append((verdict, time.perf_counter() - start))
    return out


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _peer_source(row: dict[str, Any]) -> str:
    """The repository; Math-Verify's own suite is split by test file."""
    repo, rest = str(row["source"]).split(" ", 1)
    return f"{repo} {rest.split('::')[0]}" if repo == MATH_VERIFY else repo


def peer_report(rows: list[dict[str, Any]], ours: list[tuple[Any, float]],
                theirs: list[tuple[bool | None, float]]) -> bool:
    """Print per-source agreement on the peer set; True when its targets hold."""
    by_source: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    by_repo: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    false_pos: list[str] = []
    for row, (verdict, _), (mv, _) in zip(rows, ours, theirs):
        mark = (verdict.equal == row["equal"], bool(mv) == row["equal"])
        by_source[_peer_source(row)].append(mark)
        by_repo[str(row["source"]).split(" ", 1)[0]].append(mark)
        if verdict.equal and not row["equal"] and "policy" not in row:
            false_pos.append(row["source"])
    policies = sum("policy" in row for row in rows)
    print(f"\n## Accuracy on {len(rows)} cases from other graders' test suites "
          f"({PEER.relative_to(ROOT)}; {policies} documented policy differences count as misses)\n")
    print("| source | cases | rewardsmith | math-verify 0.9.0 |")
    print("|---|---:|---:|---:|")
    for source in sorted(by_source):
        marks = by_source[source]
        print(f"| {source} | {len(marks)} | {sum(m[0] for m in marks) / len(marks):.1%} | "
              f"{sum(m[1] for m in marks) / len(marks):.1%} |")
    total_ours = sum(m[0] for marks in by_source.values() for m in marks)
    total_mv = sum(m[1] for marks in by_source.values() for m in marks)
    print(f"| **all** | {len(rows)} | **{total_ours / len(rows):.1%}** | "
          f"**{total_mv / len(rows):.1%}** |")
    ok = not false_pos
    for repo, marks in sorted(by_repo.items()):
        ours_ok, mv_ok = sum(m[0] for m in marks), sum(m[1] for m in marks)
        if repo == MATH_VERIFY:
            ok = ok and ours_ok >= 0.97 * len(marks)
            print(f"\n{repo}'s own suite: {ours_ok}/{len(marks)} = {ours_ok / len(marks):.1%} "
                  "(target >= 97%)")
        else:
            ok = ok and ours_ok >= mv_ok
    print(f"false positives outside the documented policies: {len(false_pos)}"
          + "".join(f"\n  - {s}" for s in false_pos))
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1000, help="pairs in the throughput mix")
    parser.add_argument("--timeout", type=float, default=5.0, help="our per-call timeout (s)")
    parser.add_argument("--hang", type=float, default=20.0, help="math-verify hang limit (s)")
    args = parser.parse_args()

    rows = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    labeled = [(r["reference"], r["completion"]) for r in rows]
    assert len(set(labeled)) == len(labeled), "the labeled set must hold distinct pairs"
    mix = realistic_mix(args.pairs)
    assert not set(mix) & set(labeled)
    peer_rows = [json.loads(line) for line in PEER.read_text().splitlines() if line.strip()]
    peer = [(r["reference"], r["completion"]) for r in peer_rows]

    # Warm both sides up on pairs outside both sets (imports, worker start-up).
    warm = [("1", "$1$"), ("x+1", "$1+x$")]
    run_ours(warm, args.timeout)
    ours_labeled = run_ours(labeled, args.timeout)
    ours_mix = run_ours(mix, args.timeout)
    ours_peer = run_ours(peer, args.timeout)
    mv_labeled = run_math_verify(warm + labeled, args.hang)[len(warm):]
    mv_peer = run_math_verify(warm + peer, args.hang)[len(warm):]
    mv_mix = run_math_verify(warm + mix, args.hang)[len(warm):]

    by_cat: dict[str, list[tuple[bool, bool, bool]]] = defaultdict(list)
    false_pos: dict[str, list[str]] = {"ours": [], "math-verify": []}
    for row, (verdict, _), (mv, _) in zip(rows, ours_labeled, mv_labeled):
        truth = row["equal"]
        by_cat[row["category"]].append((verdict.equal == truth, bool(mv) == truth, mv is None))
        pair = f"{row['reference']} vs {row['completion']}"
        if row["category"] == "false_positives":
            if verdict.equal:
                false_pos["ours"].append(pair)
            if mv:
                false_pos["math-verify"].append(pair)

    print(f"## Accuracy on {len(rows)} labeled pairs ({DATA.relative_to(ROOT)})\n")
    print("| category | pairs | rewardsmith | math-verify 0.9.0 |")
    print("|---|---:|---:|---:|")
    total_ours = total_mv = 0
    for cat in sorted(by_cat):
        marks = by_cat[cat]
        ours_ok = sum(m[0] for m in marks)
        mv_ok = sum(m[1] for m in marks)
        hangs = sum(m[2] for m in marks)
        total_ours += ours_ok
        total_mv += mv_ok
        extra = f" ({hangs} hung)" if hangs else ""
        print(f"| {cat} | {len(marks)} | {ours_ok / len(marks):.1%} | {mv_ok / len(marks):.1%}{extra} |")
    print(f"| **all** | {len(rows)} | **{total_ours / len(rows):.1%}** | **{total_mv / len(rows):.1%}** |")
    for name, found in false_pos.items():
        print(f"\nknown false positives accepted by {name}: {len(found)}"
              + "".join(f"\n  - `{p}`" for p in found))
    statuses: dict[str, int] = defaultdict(int)
    for verdict, _ in ours_labeled:
        statuses[verdict.status] += 1
    print(f"\nrewardsmith statuses on the labeled set: {dict(statuses)}")
    peer_ok = peer_report(peer_rows, ours_peer, mv_peer)

    ours_t = [t for _, t in ours_mix]
    mv_t = [t for _, t in mv_mix]
    ours_rate = len(ours_t) / sum(ours_t)
    mv_rate = len(mv_t) / sum(mv_t)
    agree = sum(v.equal == bool(m) for (v, _), (m, _) in zip(ours_mix, mv_mix))
    print(f"\n## Throughput on {len(mix)} distinct pairs (70% integers/fractions, 30% symbolic),"
          " one core, sequential\n")
    print("| checker | pairs/s | mean ms | p50 ms | p99 ms | max ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, times, rate in (("rewardsmith", ours_t, ours_rate), ("math-verify 0.9.0", mv_t, mv_rate)):
        print(f"| {name} | {rate:,.0f} | {statistics.mean(times) * 1e3:.2f} | "
              f"{_pct(times, 0.5) * 1e3:.2f} | {_pct(times, 0.99) * 1e3:.2f} | {max(times) * 1e3:.1f} |")
    print(f"\nspeed-up: **{ours_rate / mv_rate:.0f}x**; verdicts agree on {agree}/{len(mix)} mix pairs")
    slowest = max(t for _, t in ours_labeled + ours_mix + ours_peer)
    print(f"slowest call of ours (labeled set + peer set + mix): {slowest * 1e3:.1f} ms "
          f"(timeout {args.timeout:g} s; target <= timeout + 0.5 s)")
    ok = (total_ours >= total_mv and not false_pos["ours"] and peer_ok
          and ours_rate >= 40 * mv_rate and slowest <= args.timeout + 0.5)
    print(f"\ntargets met: {ok}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
