"""Run rewardsmith's verl adapter inside real verl code and check how verl uses it.

Needs verl (rewardsmith does not depend on it) in an environment that has torch. verl pins CUDA
packages and a torch version; for this check its pure-Python part is enough::

    pip install --no-deps verl
    pip install tensordict codetiming hydra-core omegaconf ray aiohttp dill pylatexenc
    pip install -e .           # rewardsmith
    python scripts/check_verl_reward.py [--no-ray]

No GPU and no model are needed and nothing is downloaded: a character-level tokenizer is built
here. The script

* loads ``rewardsmith.integrations.verl`` the way verl's config does: verl's own Hydra config
  (``verl/trainer/config/ppo_trainer.yaml``) composed with ``custom_reward_function`` overrides
  and passed to ``verl.trainer.ppo.reward.get_custom_reward_fn``, both as
  ``pkg://rewardsmith.integrations.verl`` and as the file path, with the rubric given as
  ``reward_kwargs.rubric``; also the legacy top-level ``custom_reward_function`` keys;
* builds a ``DataProto`` of GSM8K-style prompts x n responses (``data_source``,
  ``reward_model.ground_truth``, ``extra_info`` with ``index`` and ``question``); one prompt has an
  unreadable ground truth, so its samples are masked;
* runs verl's legacy reward managers (``verl.workers.reward_manager``: naive, batch, dapo) and the
  reward-loop managers (``verl.experimental.reward_loop``: naive, dapo, with the sync and the async
  function; through ``RewardLoopWorker`` in this process, and through ``RewardLoopManager`` with
  ray actors unless ``--no-ray``);
* checks the reward at each response's last valid token, ``reward_extra_info`` (``acc``,
  ``masked``, ``failed`` and one entry per component, each of batch length), the masked samples
  (0.0, masked=1), the groups (the batch form groups the n samples of a prompt; a group reward
  component reports its group's size) and that every value equals ``rewardsmith.score_rollouts``
  for the same responses.

Exit status: 0 when every check passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import atexit
import functools
import inspect
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

TOL = 1e-6
DATA_SOURCE = "openai/gsm8k"
# (question, ground truth, responses); the last prompt's ground truth has no number: masked.
PROBLEMS = [
    ("Tom has 3 apples and buys 4. How many?", "7", ["3+4=7 #### 7", "#### 8", "so 7"]),
    ("A box holds 6 eggs. Eggs in 2 boxes?", "12", ["#### 12", "2*6 is 12", "#### 11."]),
    ("What is the color of the sky?", "unknown", ["#### 4", "blue", "#### 0"]),
]
N = 3
RUBRIC_YAML = """\
name: verl-check
components:
  correct: {reward: gsm8k, weight: 1.0}
  marker: {reward: regex, params: {pattern: "####"}, weight: 0.25}
  gsize: {reward: "%s:group_size", weight: 0.0}
"""
GROUP_REWARD = '''\
from rewardsmith import group_reward


@group_reward
def group_size(completions):
    return [float(len(completions))] * len(completions)
'''
COMPONENTS = ("correct", "marker", "gsize")
EXTRA_KEYS = {"score", "acc", "masked", "failed", *COMPONENTS}

Check = tuple[str, bool, str]


# --------------------------------------------------------------------------- inputs


def build_tokenizer(save_dir: Path) -> Any:
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    chars = [chr(c) for c in range(32, 127)]
    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2}
    for ch in chars:
        vocab.setdefault(ch, len(vocab))
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>",
                                        eos_token="<eos>", unk_token="<unk>")
    tokenizer.save_pretrained(str(save_dir))  # the reward loop loads it by path
    return tokenizer


def samples() -> list[dict[str, Any]]:
    out = []
    for index, (question, truth, responses) in enumerate(PROBLEMS):
        for response in responses:
            out.append({"index": index, "question": question, "truth": truth,
                        "response": response})
    return out


def build_batch(tokenizer: Any) -> Any:
    """A fresh DataProto (verl's managers write into extra_info, so never reuse one)."""
    import numpy as np
    import torch
    from verl import DataProto

    rows = samples()
    prompts = [tokenizer.encode(f"Q: {r['question']} A:", add_special_tokens=False) for r in rows]
    # every other response ends with EOS, as a generation that stopped would
    responses = [tokenizer.encode(r["response"], add_special_tokens=False)
                 + ([tokenizer.eos_token_id] if n % 2 else []) for n, r in enumerate(rows)]
    plen = max(map(len, prompts))
    rlen = max(map(len, responses)) + 2
    pad = tokenizer.pad_token_id
    prompt_t = torch.full((len(rows), plen), pad, dtype=torch.long)
    resp_t = torch.full((len(rows), rlen), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), plen + rlen), dtype=torch.long)
    for i, (p, r) in enumerate(zip(prompts, responses)):
        prompt_t[i, plen - len(p):] = torch.tensor(p)  # prompts left-padded
        resp_t[i, :len(r)] = torch.tensor(r)  # responses right-padded
        mask[i, plen - len(p):plen + len(r)] = 1
    input_ids = torch.cat([prompt_t, resp_t], dim=1)
    position_ids = (mask.cumsum(dim=1) - 1).clamp(min=0)
    obj = functools.partial(np.array, dtype=object)
    return DataProto.from_dict(
        tensors={"prompts": prompt_t, "responses": resp_t, "input_ids": input_ids,
                 "attention_mask": mask, "position_ids": position_ids},
        non_tensors={
            "data_source": obj([DATA_SOURCE] * len(rows)),
            "reward_model": obj([{"ground_truth": r["truth"], "style": "rule"} for r in rows]),
            "extra_info": obj([{"index": r["index"], "question": r["question"], "split": "test"}
                               for r in rows]),
        },
    )


def valid_lengths(tokenizer: Any) -> list[int]:
    return [len(tokenizer.encode(r["response"], add_special_tokens=False)) + (n % 2)
            for n, r in enumerate(samples())]


# --------------------------------------------------------------------------- expected values


def expected(rubric_path: Path, grouped: bool) -> list[dict[str, float]]:
    """What rewardsmith itself gives for the same responses (groups: prompts, or singletons)."""
    from rewardsmith import Rollout, Rubric, score_rollouts
    from rewardsmith.integrations.adapters import accuracy, accuracy_component
    from rewardsmith.types import Status

    rubric = Rubric.from_yaml(rubric_path)
    rows = samples()
    rollouts = [Rollout(id=str(n), group=str(r["index"]) if grouped else str(n),
                        prompt=r["question"], completion=r["response"], answer=r["truth"])
                for n, r in enumerate(rows)]
    scores = score_rollouts(rubric, rollouts, workers=0)
    acc_name = accuracy_component(rubric)
    out = []
    for score in scores:
        row = {"score": 0.0 if score.reward is None else score.reward,
               "acc": accuracy(score, acc_name),
               "masked": 1.0 if score.reward is None else 0.0,
               "failed": 1.0 if score.status in (Status.ERROR, Status.TIMEOUT) else 0.0}
        for name in COMPONENTS:
            value = score.components.get(name)
            row[name] = 0.0 if value is None else float(value)
        out.append(row)
    return out


# --------------------------------------------------------------------------- recording


class Recorder:
    """Wraps the function verl loaded; records what each call was given."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def wrap(self, func: Callable[..., Any]) -> Callable[..., Any]:
        def record(args: tuple, kwargs: dict) -> None:
            self.calls.append({"args": len(args), "kwargs": sorted(kwargs),
                               "extra_info": sorted(kwargs.get("extra_info") or {}),
                               "batch": len(kwargs.get("solution_strs") or [])})

        if inspect.iscoroutinefunction(func):
            async def awrapper(*args: Any, **kwargs: Any) -> Any:
                record(args, kwargs)
                return await func(*args, **kwargs)
            return awrapper

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            record(args, kwargs)
            return func(*args, **kwargs)
        return wrapper

    def summary(self) -> str:
        if not self.calls:
            return "no calls recorded"
        first = self.calls[0]
        batch = f", {first['batch']} samples per call" if first["batch"] else ""
        info = f"; extra_info keys {first['extra_info']}" if first["extra_info"] else ""
        positional = f" and {first['args']} positional" if first["args"] else ""
        return (f"{len(self.calls)} call(s) with keywords {first['kwargs']}{positional}"
                f"{batch}{info}")


# --------------------------------------------------------------------------- checks


def check_result(label: str, reward_tensor: Any, extra: dict[str, Any], lengths: list[int],
                 want: list[dict[str, float]]) -> list[Check]:
    checks: list[Check] = []
    size = len(want)
    bad = []
    for i in range(size):
        row = reward_tensor[i]
        at = float(row[lengths[i] - 1])
        others = float(row.abs().sum()) - abs(at)
        if abs(at - want[i]["score"]) > TOL or others > TOL:
            bad.append(f"#{i}: {at} at {lengths[i] - 1} (want {want[i]['score']}), rest {others}")
    checks.append((f"{label}: reward at each response's last valid token", not bad,
                   "; ".join(bad) or f"{size} rows"))
    keys = set(extra)
    checks.append((f"{label}: reward_extra_info keys", EXTRA_KEYS <= keys,
                   f"{sorted(keys)}" + (f", missing {sorted(EXTRA_KEYS - keys)}"
                                        if EXTRA_KEYS - keys else "")))
    lengths_bad = {k: len(v) for k, v in extra.items() if len(v) != size}
    checks.append((f"{label}: every extra-info entry has batch length {size}", not lengths_bad,
                   str(lengths_bad or "ok")))
    mismatch = []
    for key in sorted(EXTRA_KEYS & keys):
        got = [float(v) for v in extra[key]]
        for i in range(min(size, len(got))):
            if not math.isclose(got[i], want[i][key], abs_tol=TOL):
                mismatch.append(f"{key}[{i}]={got[i]} want {want[i][key]}")
    checks.append((f"{label}: values equal rewardsmith.score_rollouts", not mismatch,
                   "; ".join(mismatch[:6]) or "all equal"))
    masked = [i for i, w in enumerate(want) if w["masked"]]
    ok = bool(masked) and all(float(extra.get("masked", [0] * size)[i]) == 1.0
                              and float(reward_tensor[i].abs().sum()) == 0.0 for i in masked)
    checks.append((f"{label}: masked samples get 0.0 and masked=1", ok, f"samples {masked}"))
    return checks


def reward_from_manager(manager: Any, data: Any) -> tuple[Any, dict[str, Any]]:
    result = manager(data, return_dict=True)
    return result["reward_tensor"], dict(result["reward_extra_info"])


def reward_from_loop_worker(worker: Any, data: Any) -> tuple[Any, dict[str, Any]]:
    """RewardLoopWorker.compute_score_batch, then what RewardLoopManager.compute_rm_score does
    with the outputs (assemble_rm_scores, extra keys taken from the first sample)."""
    import numpy as np

    outputs = worker.loop.run_until_complete(worker.compute_score_batch(data))
    scores = [o["reward_score"] for o in outputs]
    tensor = worker.reward_manager.assemble_rm_scores(data, scores)
    infos = [o.get("reward_extra_info", {}) for o in outputs]
    keys = list(infos[0].keys())
    return tensor, {k: np.array([info[k] for info in infos]) for k in keys}


# --------------------------------------------------------------------------- main


def compose(overrides: list[str]) -> Any:
    import verl
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        return hydra_compose(config_name="ppo_trainer", overrides=overrides)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--no-ray", action="store_true",
                        help="skip RewardLoopManager (ray actors); the worker runs in-process")
    parser.add_argument("--show", action="store_true", help="print verl's per-sample logs")
    args = parser.parse_args()
    started = time.monotonic()
    os.environ.setdefault("REWARDSMITH_WORKERS", "0")
    os.environ.pop("REWARDSMITH_RUBRIC", None)
    try:
        import verl
        from verl.trainer.ppo.reward import get_custom_reward_fn, load_reward_manager
    except ImportError as exc:
        print(f"verl is not installed ({exc}); see this script's docstring")
        return 1

    import rewardsmith.integrations.verl as adapter

    checks: list[Check] = []
    notes: list[str] = []
    tmp = Path(tempfile.mkdtemp(prefix="verlcheck-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    (tmp / "groupsize.py").write_text(GROUP_REWARD)
    rubric_path = tmp / "rubric.yaml"
    rubric_path.write_text(RUBRIC_YAML % (tmp / "groupsize.py"))
    tok_dir = tmp / "tokenizer"
    tokenizer = build_tokenizer(tok_dir)
    lengths = valid_lengths(tokenizer)
    per_sample = expected(rubric_path, grouped=False)
    grouped = expected(rubric_path, grouped=True)
    print(f"verl {verl.__version__}; batch: {len(PROBLEMS)} prompts x {N} responses; "
          f"rubric {rubric_path}")

    # ---- loading, as verl's config does
    base = ["reward.num_workers=2", f"actor_rollout_ref.model.path={tok_dir}",
            "reward.custom_reward_function.name=compute_score",
            f"+reward.custom_reward_function.reward_kwargs.rubric={rubric_path}"]
    forms = {"pkg://": "pkg://rewardsmith.integrations.verl", "file path": adapter.__file__}
    loaded: dict[str, Callable[..., Any]] = {}
    for label, path in forms.items():
        try:
            cfg = compose([*base, f"reward.custom_reward_function.path={path}"])
            fn = get_custom_reward_fn(cfg)
            value = fn(data_source=DATA_SOURCE, solution_str="#### 7", ground_truth="7",
                       extra_info={"index": 0, "question": "q"}) if fn else None
            ok = isinstance(value, dict) and value.get("score") == 1.25
            loaded[label] = fn
            checks.append((f"load {label} via get_custom_reward_fn", ok, f"one call -> {value}"))
        except Exception as exc:  # noqa: BLE001 - reported as a failed check
            checks.append((f"load {label} via get_custom_reward_fn", False, repr(exc)))
    legacy = [f"custom_reward_function.path={forms['pkg://']}",
              "custom_reward_function.name=compute_score",
              f"+custom_reward_function.reward_kwargs.rubric={rubric_path}"]
    cfg = compose(["reward.num_workers=2", *legacy])
    direct = get_custom_reward_fn(cfg)
    notes.append("legacy top-level custom_reward_function.* keys: get_custom_reward_fn reads only "
                 f"reward.custom_reward_function -> {'loaded' if direct else 'None (ignored)'}")
    try:
        from verl.experimental.reward_loop import migrate_legacy_reward_impl

        migrated = get_custom_reward_fn(migrate_legacy_reward_impl(cfg))
        checks.append(("legacy keys after migrate_legacy_reward_impl load the function",
                       migrated is not None, "migrated to reward.custom_reward_function"))
    except Exception as exc:  # noqa: BLE001
        checks.append(("legacy keys after migrate_legacy_reward_impl", False, repr(exc)))
    fn = loaded.get("pkg://") or loaded.get("file path")
    if fn is None:
        return report(checks, notes, started)

    # ---- legacy managers: verl.workers.reward_manager
    from verl.workers.reward_manager import get_reward_manager_cls as legacy_cls

    num_examine = 1 if args.show else 0
    for name in ("naive", "batch", "dapo"):
        rec = Recorder()
        try:
            manager = legacy_cls(name)(tokenizer=tokenizer, num_examine=num_examine,
                                       compute_score=rec.wrap(fn), reward_fn_key="data_source")
            tensor, extra = reward_from_manager(manager, build_batch(tokenizer))
            want = grouped if name == "batch" else per_sample
            checks += check_result(f"workers.reward_manager {name}", tensor, extra, lengths, want)
            notes.append(f"workers.reward_manager {name}: {rec.summary()}")
            if name == "batch":
                sizes = [float(v) for v in extra.get("gsize", [])]
                checks.append(("batch manager: a prompt's consecutive samples are one group",
                               sizes == [float(N)] * len(lengths), f"group sizes {sizes}"))
        except Exception as exc:  # noqa: BLE001
            checks.append((f"workers.reward_manager {name} runs", False, repr(exc)))
            notes.append(f"workers.reward_manager {name}: {rec.summary()}, then {exc!r}")

    # ---- reward-loop managers, loaded by load_reward_manager as RewardLoopWorker does
    from verl.experimental.reward_loop import RewardLoopWorker

    for name, fn_name in (("naive", "compute_score"), ("dapo", "compute_score"),
                          ("naive", "compute_score_async")):
        label = f"reward_loop {name} ({fn_name})"
        try:
            cfg = compose([*base, f"reward.custom_reward_function.path={forms['pkg://']}",
                           f"reward.reward_manager.name={name}",
                           f"reward.custom_reward_function.name={fn_name}"])
            worker = RewardLoopWorker(cfg)
            rec = Recorder()
            worker.reward_manager.compute_score = rec.wrap(worker.reward_manager.compute_score)
            tensor, extra = reward_from_loop_worker(worker, build_batch(tokenizer))
            checks += check_result(label, tensor, extra, lengths, per_sample)
            notes.append(f"{label}: {type(worker.reward_manager).__name__}, {rec.summary()}")
        except Exception as exc:  # noqa: BLE001
            checks.append((f"{label} runs", False, repr(exc)))
    try:
        cfg = compose([*base, f"reward.custom_reward_function.path={forms['pkg://']}",
                       "reward.reward_manager.name=batch"])
        load_reward_manager(cfg, tokenizer)
        notes.append("reward_loop batch: loaded")
    except Exception as exc:  # noqa: BLE001
        notes.append(f"reward_loop batch: not available in this verl ({exc})")

    # ---- RewardLoopManager with ray actors (what the trainer runs)
    if not args.no_ray:
        try:
            import ray
            from verl.experimental.reward_loop import RewardLoopManager
            from verl.trainer.ppo.reward import extract_reward

            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=args.show,
                     runtime_env={"env_vars": {"REWARDSMITH_WORKERS": "0"}})
            try:
                cfg = compose([*base, f"reward.custom_reward_function.path={forms['pkg://']}"])
                data = build_batch(tokenizer)
                out = RewardLoopManager(cfg).compute_rm_score(data)
                tensor, extra = extract_reward(data.union(out))
                checks += check_result("RewardLoopManager (ray)", tensor, extra, lengths,
                                       per_sample)
            finally:
                ray.shutdown()
        except Exception as exc:  # noqa: BLE001
            checks.append(("RewardLoopManager (ray) runs", False, repr(exc)))
    return report(checks, notes, started)


def report(checks: list[Check], notes: list[str], started: float) -> int:
    print("\nwhat verl passed / found:")
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
