"""The built-in rewards page: every reward in the registry and its parameters, read from the
functions' signatures; what each param means comes from ``reference_text.BUILTIN_PARAMS``."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable

from reference_text import BUILTIN_PARAMS

_ROLLOUT_ARGUMENTS = {"completion", "response", "answer", "label", "ground_truth", "prompt",
                      "metadata", "truncated", "rollout", "sample", "id", "group", "turns"}


def _annotation(param: object) -> str:
    annotation = getattr(param, "annotation", inspect.Parameter.empty)
    if annotation is inspect.Parameter.empty:
        return ""
    return annotation if isinstance(annotation, str) else getattr(annotation, "__name__",
                                                                  str(annotation))


def rewards_page(header: str, cell: Callable[[str], str]) -> str:
    from rewardsmith.rewards import all_builtins

    builtins = all_builtins()
    missing: list[str] = []
    described: set[tuple[str, str]] = set()
    out = [header, "# Built-in rewards reference\n\n",
           "Every built-in reward in the registry (`rewardsmith list` prints the same names), "
           "with its parameters. *Rollout arguments* are filled from each rollout by name; "
           "*params* are set in the rubric (`params:`) or with `--param k=v`. The guides: "
           "[answers and rules](../answers.md), [math](../math.md), [code](../code.md), "
           "[instructions and structured output](../instructions.md).\n\n",
           "| reward | kind | description |\n|---|---|---|\n"]
    for item in builtins:
        out.append(f"| [`{item.name}`](#{item.name}) | {item.kind} | {cell(item.description)} |\n")
    out.append("\n")
    for item in builtins:
        signature = inspect.signature(item.func)
        timeout = (f"{item.default_timeout:g} s" if item.default_timeout is not None
                   else "the rubric's")
        notes = [f"kind: {item.kind}", f"default timeout: {timeout}"]
        if item.bounded:
            notes.append("linear time, cannot hang (may run in-process on one core)")
        if item.boxable:
            notes.append(f"has a `boxed_{item.name}` twin")
        out += [f"## {item.name}\n\n", cell(item.description), "\n\n", "; ".join(notes), ".\n\n"]
        rollout_args = [n for n in signature.parameters if n in _ROLLOUT_ARGUMENTS]
        params = [p for n, p in signature.parameters.items() if n not in _ROLLOUT_ARGUMENTS]
        out.append("Rollout arguments: " + (", ".join(f"`{n}`" for n in rollout_args) or "none")
                   + ".\n\n")
        # a boxed_ twin takes its base reward's params, and their descriptions
        twin_of = item.name.removeprefix("boxed_")
        if params:
            out.append("| param | type | default | meaning |\n|---|---|---|---|\n")
            for p in params:
                default = ("required" if p.default is inspect.Parameter.empty
                           else f"`{p.default!r}`")
                key = next((k for k in ((item.name, p.name), (twin_of, p.name))
                            if k in BUILTIN_PARAMS), None)
                if key is None:
                    missing.append(f"{item.name}.{p.name}")
                    continue
                out.append(f"| `{p.name}` | {cell(_annotation(p))} | {cell(default)} | "
                           f"{cell(BUILTIN_PARAMS[key])} |\n")
                described.add(key)
            out.append("\n")
        else:
            out.append("No params.\n\n")
    if missing:
        raise ValueError("built-in reward params without a description (add them to "
                         "BUILTIN_PARAMS in scripts/reference_text.py): "
                         + ", ".join(missing))
    gone = sorted(f"{r}.{p}" for r, p in set(BUILTIN_PARAMS) - described)
    if gone:
        print("gen_reference: warning: BUILTIN_PARAMS describes params no built-in has: "
              + ", ".join(gone), file=sys.stderr)
    return "".join(out).rstrip() + "\n"
