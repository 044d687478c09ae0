"""Run rewardsmith's slime/Miles adapter through slime's and Miles' own reward code.

Needs the source of slime (``THUDM/slime``) and/or Miles (``radixark/miles``): a checkout given by
path, or the packages installed. rewardsmith depends on neither. Their reward path imports torch,
ray, aiohttp, sympy, pylatexenc and httpx (no GPU, SGLang or Megatron is needed)::

    pip install torch --index-url https://download.pytorch.org/whl/cpu
    pip install ray aiohttp sympy pylatexenc httpx numpy pybase64
    pip install -e '.[server]'                    # rewardsmith
    git clone https://github.com/THUDM/slime /tmp/slime
    git clone https://github.com/radixark/miles /tmp/miles
    python scripts/check_slime_reward.py --slime /tmp/slime --miles /tmp/miles [--server-python PATH]

A trainer whose source cannot be imported is skipped with the reason; when neither can, the
script says so and exits 0 without checking anything. For each trainer it can import, it uses the
trainer's real ``Sample`` class (``<pkg>.utils.types.Sample``, with its ``Status`` enum) and the
reward entry points its rollout calls (``<pkg>.rollout.rm_hub.async_rm`` and
``batched_async_rm``), with ``args`` carrying the fields they read:

* ``--custom-rm-path rewardsmith.integrations.<slime|miles>.custom_rm``: one sample at a time
  (``async_rm``), each prompt's group at once as with ``--group-rm`` (``batched_async_rm``), a
  list of lists (what ``--group-rm`` hands over when a custom generate function returns several
  samples), and ``--reward-key reward`` (a dict per sample);
* Miles' ``batched_async_rm(..., inplace_set_reward_field=True)``, which sets ``sample.reward``;
* ``--rm-type remote_rm --rm-url http://127.0.0.1:PORT/slime`` against a ``rewardsmith serve``
  subprocess: the trainer posts prompt, response and label only, so a truncated sample is scored
  as if it were complete there (the check expects exactly that).

Responses carry the stop text ``<|im_end|>`` as slime's ``sample.response`` does (the ``ends``
component, a response ending in a digit, tells whether it was cut off). One sample of
each group is TRUNCATED, one prompt has a FAILED and an ABORTED sample. Every reward must equal
``rewardsmith.score_rollouts`` for the same responses without the stop text (0.0 for the masked
ones). Exit status: 0 when every check passes (or nothing could be checked), 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import types
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

TOL = 1e-9
END = "<|im_end|>"
# (question, label, responses); the third response of each group is TRUNCATED.
PROBLEMS = [
    ("Tom has 3 apples and buys 4. How many?", "7", ["3+4=7 #### 7", "#### 8", "#### 7", "so 7."]),
    ("A box holds 6 eggs. Eggs in 2 boxes?", "12", ["#### 12", "2*6 is 12", "#### 12", "#### 1"]),
]
# Statuses by (group, position); the rest are COMPLETED.
STATUSES = {(0, 2): "TRUNCATED", (1, 2): "TRUNCATED", (1, 3): "FAILED", (0, 3): "ABORTED"}
COMPONENTS = ("correct", "overlong", "marker", "ends")
RUBRIC_YAML = """\
name: slime-check
components:
  correct: {reward: gsm8k, weight: 1.0}
  overlong: {reward: length, params: {max_length: 400, buffer: 100}, weight: 0.5}
  marker: {reward: marker, weight: 0.2}
  ends: {reward: regex, params: {pattern: "[0-9]$"}, weight: 0.1}
"""
Check = tuple[str, bool, str]


def load_trainer(name: str, path: str | None) -> tuple[Any, Any, str]:
    """(Sample class, rm_hub module, where) of ``slime`` or ``miles``; ImportError says why not."""
    if path is not None:
        root = Path(path).expanduser().resolve()
        if not (root / name / "__init__.py").exists() and not (root / name).is_dir():
            raise ImportError(f"{root} has no {name}/ package directory")
        sys.path.insert(0, str(root))
    types_module = importlib.import_module(f"{name}.utils.types")
    rm_hub = importlib.import_module(f"{name}.rollout.rm_hub")
    return types_module.Sample, rm_hub, str(Path(rm_hub.__file__ or name).resolve().parents[2])


def make_samples(sample_cls: Any) -> list[list[Any]]:
    groups = []
    for g, (question, label, responses) in enumerate(PROBLEMS):
        group = []
        for s, response in enumerate(responses):
            status = getattr(sample_cls.Status, STATUSES.get((g, s), "COMPLETED"))
            group.append(sample_cls(group_index=g, index=g * 10 + s, prompt=question,
                                    response=response + END, label=label, status=status,
                                    metadata={"source": "check"}))
        groups.append(group)
    return groups


def expected(rubric_path: Path, *, remote: bool = False) -> list[list[dict[str, float]]]:
    """Reward and logged values per sample, from rewardsmith for the responses without END.

    ``remote``: what the /slime route sees from slime, which posts no status: nothing is
    truncated or masked there."""
    from rewardsmith import Rollout, Rubric, score_rollouts

    rubric = Rubric.from_yaml(rubric_path)
    out = []
    for g, (question, label, responses) in enumerate(PROBLEMS):
        states = ["COMPLETED" if remote else STATUSES.get((g, s), "COMPLETED")
                  for s in range(len(responses))]
        live = [s for s, state in enumerate(states) if state not in ("ABORTED", "FAILED")]
        rollouts = [Rollout(str(s), str(g), question, responses[s], label,
                            truncated=states[s] == "TRUNCATED") for s in live]
        scores = dict(zip(live, score_rollouts(rubric, rollouts, workers=0)))
        group = []
        for s in range(len(responses)):
            score = scores.get(s)
            if score is None or score.reward is None:
                group.append({"reward": 0.0, "masked": 1.0, **{c: 0.0 for c in COMPONENTS}})
                continue
            values = {c: float(score.components.get(c) or 0.0) for c in COMPONENTS}
            group.append({"reward": score.reward, "masked": 0.0, **values})
        out.append(group)
    return out


def same(got: Any, want: dict[str, float], keyed: bool) -> bool:
    if not keyed:
        return isinstance(got, (int, float)) and abs(float(got) - want["reward"]) <= TOL
    return isinstance(got, dict) and all(abs(float(got[k]) - v) <= TOL for k, v in want.items())


def compare(label: str, got: list[Any], want: list[dict[str, float]], keyed: bool) -> Check:
    bad = [n for n, (g, w) in enumerate(zip(got, want)) if not same(g, w, keyed)]
    if len(got) != len(want):
        return label, False, f"{len(got)} rewards for {len(want)} samples"
    if bad:
        n = bad[0]
        return label, False, f"sample {n}: got {got[n]!r}, expected {want[n]!r}"
    return label, True, f"{len(got)} rewards equal rewardsmith's"


def rm_args(name: str, **overrides: Any) -> types.SimpleNamespace:
    """The ``args`` fields slime's and Miles' rm_hub read."""
    values: dict[str, Any] = {
        "custom_rm_path": f"rewardsmith.integrations.{name}.custom_rm", "rm_type": None,
        "rm_url": None, "group_rm": False, "reward_key": None, "eval_reward_key": None,
        # Miles' multi-LoRA switch (is_multi_lora_enabled) reads these; off.
        "lora_adapters": None, "multi_lora": False, "lora_rank": 0}
    values.update(overrides)
    return types.SimpleNamespace(**values)


async def check_custom_rm(name: str, sample_cls: Any, rm_hub: Any,
                          want: list[list[dict[str, float]]]) -> list[Check]:
    checks: list[Check] = []
    flat_want = [w for group in want for w in group]

    async def one_at_a_time(args: Any, samples: list[Any]) -> list[Any]:
        # slime's generate_and_rm skips the reward of an ABORTED sample; asked anyway, the
        # adapter masks it, as it does a FAILED one.
        return [await rm_hub.async_rm(args, s) for s in samples]

    for keyed in (False, True):
        args = rm_args(name, reward_key="reward" if keyed else None)
        form = "--reward-key reward" if keyed else "float"
        samples = [s for group in make_samples(sample_cls) for s in group]
        checks.append(compare(f"{name} async_rm one sample at a time ({form})",
                              await one_at_a_time(args, samples), flat_want, keyed))
        args = rm_args(name, group_rm=True, reward_key="reward" if keyed else None)
        got = []
        for group in make_samples(sample_cls):
            got.extend(await rm_hub.batched_async_rm(args, group))
        checks.append(compare(f"{name} batched_async_rm per group, --group-rm ({form})", got,
                              flat_want, keyed))
    # A generate function that returns several samples per prompt: the group is a list of lists.
    args = rm_args(name, group_rm=True, reward_key="reward")
    for g, group in enumerate(make_samples(sample_cls)):
        nested = [group[:2], [group[2]], group[3:]]
        out = await rm_hub.batched_async_rm(args, nested)
        shape_ok = [len(x) for x in out] == [2, 1, len(group) - 3]
        flat = [o for inner in out for o in inner] if shape_ok else []
        result = compare(f"{name} batched_async_rm list of lists (group {g})", flat, want[g], True)
        checks.append(result if shape_ok else (result[0], False, f"shape {out!r}"))
    if "inplace_set_reward_field" in _parameters(rm_hub.batched_async_rm):
        args = rm_args(name, group_rm=True)
        got = []
        for group in make_samples(sample_cls):
            await rm_hub.batched_async_rm(args, group, inplace_set_reward_field=True)
            got.extend(s.reward for s in group)
        checks.append(compare(f"{name} batched_async_rm(inplace_set_reward_field=True) sets "
                              "sample.reward", got, flat_want, False))
    return checks


def _parameters(func: Callable[..., Any]) -> set[str]:
    return set(inspect.signature(func).parameters)


async def check_remote(name: str, sample_cls: Any, rm_hub: Any, url: str,
                       want: list[list[dict[str, float]]]) -> list[Check]:
    args = rm_args(name, custom_rm_path=None, rm_type="remote_rm", rm_url=url)
    got = []
    for group in make_samples(sample_cls):
        got.extend([await rm_hub.async_rm(args, s) for s in group])
    closer = getattr(rm_hub, "_shared_session", None)
    if closer is not None and not closer.closed:
        await closer.close()
    return [compare(f"{name} --rm-type remote_rm -> rewardsmith serve /slime", got,
                    [w for group in want for w in group], False)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_python(given: str | None) -> str:
    if given:
        return given
    probe = [sys.executable, "-c", "import fastapi, uvicorn, prometheus_client"]
    if subprocess.run(probe, capture_output=True).returncode == 0:
        return sys.executable
    repo_venv = Path(__file__).resolve().parents[1] / ".venv" / "bin" / "python"
    return str(repo_venv) if repo_venv.exists() else sys.executable


def start_server(python: str, rubric: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    cmd = [python, "-m", "rewardsmith", "serve", "--rubric", str(rubric), "--host", "127.0.0.1",
           "--port", str(port), "--workers", "1", "--log-level", "warning"]
    proc = subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"rewardsmith serve exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
                if resp.status == 200:
                    return proc
        except OSError:
            time.sleep(0.3)
    proc.terminate()
    raise RuntimeError("rewardsmith serve did not answer /health within 60 s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--slime", help="a slime checkout (the directory holding slime/)")
    parser.add_argument("--miles", help="a Miles checkout (the directory holding miles/)")
    parser.add_argument("--server-python", help="interpreter for `rewardsmith serve`")
    parser.add_argument("--no-server", action="store_true", help="skip the remote_rm check")
    options = parser.parse_args()
    started = time.monotonic()

    trainers: dict[str, tuple[Any, Any]] = {}
    notes: list[str] = []
    for name, path in (("slime", options.slime), ("miles", options.miles)):
        try:
            sample_cls, rm_hub, where = load_trainer(name, path)
        except Exception as exc:  # noqa: BLE001 - any import failure means: skip, and say why
            notes.append(f"{name}: skipped, its reward code cannot be imported "
                         f"({type(exc).__name__}: {exc})")
            continue
        trainers[name] = (sample_cls, rm_hub)
        statuses = ", ".join(s.name for s in sample_cls.Status)
        notes.append(f"{name}: {where} (Sample.Status: {statuses})")
    if not trainers:
        print("\n".join(notes))
        print("skipped: neither slime nor Miles could be imported; give --slime/--miles PATH "
              "to a checkout, in an environment with their dependencies (see --help)")
        return 0

    workdir = Path(tempfile.mkdtemp(prefix="rewardsmith-slime-check-"))
    rubric = workdir / "rubric.yaml"
    rubric.write_text(RUBRIC_YAML)
    os.environ["REWARDSMITH_RUBRIC"] = str(rubric)
    os.environ.setdefault("REWARDSMITH_WORKERS", "0")
    want = expected(rubric)
    checks: list[Check] = []
    server = None
    try:
        for name, (sample_cls, rm_hub) in trainers.items():
            checks += asyncio.run(check_custom_rm(name, sample_cls, rm_hub, want))
        if not options.no_server:
            port = free_port()
            server = start_server(server_python(options.server_python), rubric, port,
                                  workdir / "server.log")
            url = f"http://127.0.0.1:{port}/slime"
            remote_want = expected(rubric, remote=True)
            for name, (sample_cls, rm_hub) in trainers.items():
                checks += asyncio.run(check_remote(name, sample_cls, rm_hub, url, remote_want))
    except Exception as exc:  # noqa: BLE001 - a crash is a failed check, reported with the rest
        checks.append(("the checks run to the end", False, f"{type(exc).__name__}: {exc}"))
    finally:
        if server is not None:
            server.terminate()
            server.wait(30)
        from rewardsmith.integrations import close_engines

        close_engines()
        shutil.rmtree(workdir, ignore_errors=True)
    return report(checks, notes, started)


def report(checks: list[Check], notes: list[str], started: float) -> int:
    print("\nwhat was found:")
    for note in notes:
        print(f"  - {note}")
    print("\nchecks:")
    for name, ok, detail in checks:
        print(f"  [{'PASS' if ok else 'FAIL'}] {name}: {detail}")
    failed = sum(not ok for _, ok, _ in checks)
    print(f"\n{len(checks) - failed}/{len(checks)} checks passed in "
          f"{time.monotonic() - started:.1f}s")
    return 1 if failed or not checks else 0


if __name__ == "__main__":
    sys.exit(main())
