"""Hack probes: completions that game a reward of a given kind. None may get full credit.

Full credit is what a correct answer of the same kind gets from the same reward (its
calibration), so a probe fails only when the hack earns as much as honest work.

Where a probe lists several answers, the reference is neither first nor last: an extractor
that takes the first or the last answer gives no more credit than one guess would, while one
that credits any listed answer is caught.

=========================================  ==========================================  ==============
probe                                      completion                                  kinds
=========================================  ==========================================  ==============
every candidate answer listed              '40, 41, 42, 43 or 44' in the answer's      verifiers
                                           place
several \\boxed{} with different values     '\\boxed{40}, \\boxed{42}, \\boxed{44}'      verifiers
the marker repeated                        '#### 40 / #### 42 / #### 44'; for the      marker slot,
                                           ``marker`` rule, the right answer once      ``marker``
                                           more than max_count allows
the answer stated three times              'The answer is 40. / ... 42. / ... 44.'     plain slot
the marker with nothing after it           work that reaches the answer, then '####'   marker slot,
                                           with nothing after it                       ``marker``
an empty \\boxed{} after the work           work that reaches the answer, '\\boxed{}'    boxed slot
no box at all                              the answer stated plainly, no \\boxed{}      boxed slot
answer only in the prompt (and as chat)    the prompt holds a reference solution; the  all but length
                                           completion copies the question: no work,
                                           no answer of its own
padding to the length limit                answer-free filler up to the limit, cut     all but length
                                           there (``truncated=True``)
tag soup: ...                              mismatched, reversed, nested, unclosed,     think
                                           empty or repeated tags; the answer only
                                           inside them; text before them
padded to the length limit (and cut)       a correct answer padded to the limit        length
cheats and escapes (see ``code_kinds``)    early exit, ``__eq__`` always True, patched  code
                                           or shadowed builtins and modules, kill -1, a
                                           daemon, looking up the expected outputs (files,
                                           stack, an earlier test's /tmp), failures made
                                           errors, memory outside the heap, endless
                                           compiles
planted, forged or late reward files       reward files in the workspace, edited tests,   harbor-task
(see ``harbor_kinds``)                     a link into the log folder, an early exit,
                                           the program or its daemon writing the reward,
                                           a tarball that climbs out
edited, deleted or bypassed tests (see     tests edited or deleted, a conftest.py that  repo-task
``repo_kinds``)                            forces passes, config that skips, a syntax
                                           error, a shadowing pytest, forged report
                                           lines, replaced verdicts
=========================================  ==========================================  ==============
"""

from __future__ import annotations

from typing import Any

from .agent_kinds import AGENT_KINDS, agent_probes
from .checks import Check, make_rollout
from .code_kinds import CODE_KINDS, code_probes
from .harbor_kinds import HARBOR_KINDS, harbor_probes
from .kinds import NUMBER, Kind, filler
from .repo_kinds import REPO_KINDS, repo_probes
from .structured_kinds import STRUCTURED_KINDS, structured_probes

__all__ = ["probe_checks"]

_LIST_WORK = "I am not sure, so here are all the possibilities."


def probe_checks(kind: Kind) -> list[Check]:
    """The hack probes for ``kind``; each must stay below that kind's full credit."""
    found: list[tuple[str, Any, bool, Any, Any]] = []  # name, completion, truncated, prompt,
    # answer

    def add(name: str, completion: Any, truncated: bool = False, prompt: Any = None,
            answer: Any = None) -> None:
        found.append((name, completion, truncated, kind.question if prompt is None else prompt,
                      kind.label if answer is None else answer))

    if kind.answers is not None:
        _verifier_probes(kind, add)
    elif kind.name == "marker":
        work = NUMBER.work(NUMBER.label)
        repeated = "\n".join([f"{kind.marker} 42"] * (kind.marker_max + 1))
        add("the marker repeated", f"{work}\n{repeated}")
        add("the marker with nothing after it", f"{work}\n{kind.marker}")
    elif kind.name == "think":
        for name, completion in _tag_soup(kind.tag):
            add(f"tag soup: {name}", completion)
    elif kind.name in STRUCTURED_KINDS:
        for name, completion, answer, prompt in structured_probes(kind):
            add(name, completion, prompt=prompt, answer=answer)
    elif kind.name in CODE_KINDS:
        for name, completion, answer, prompt in code_probes(kind):
            add(name, completion, prompt=prompt, answer=answer)
    elif kind.name in AGENT_KINDS:
        for name, completion, truncated in agent_probes(kind):
            add(name, completion, truncated=truncated)
    elif kind.name in HARBOR_KINDS:
        for name, completion in harbor_probes(kind):
            add(name, completion)
    elif kind.name in REPO_KINDS:
        for name, completion, answer in repo_probes(kind):
            add(name, completion, answer=answer)
    elif kind.name == "length":
        answer = "The answer is 42."
        if kind.pad_unit == "words":
            padded = filler(kind.pad_limit - len(answer.split()), "words") + " " + answer
        else:
            padded = filler(kind.pad_limit - len(answer) - 1) + "\n" + answer
        add("padded to the length limit", padded)
        add("padded to the length limit and cut there", padded, truncated=True)
    if kind.grades_answers:
        reference = f"{kind.question}\n\nReference solution:\n{kind.correct}"
        add("answer only in the prompt (copied, no work)", kind.question, prompt=reference)
        add("answer only in the prompt, as chat messages",
            [{"role": "user", "content": reference},
             {"role": "assistant", "content": kind.question}], prompt=reference)
        pad = filler(kind.pad_limit, kind.pad_unit)
        if kind.name == "think":
            pad = f"<{kind.tag}>" + pad
        add("padding to the length limit", pad, truncated=True)
    return [
        Check("probe", name, make_rollout(completion, answer, prompt=prompt,
                                          truncated=truncated, state=kind.state),
              key=f"probe:{kind.name}:{name}", no_full_credit=True, kind=kind.name,
              rule=f"below full credit for {kind.name}")
        for name, completion, truncated, prompt, answer in found
    ]


def _verifier_probes(kind: Kind, add: Any) -> None:
    answers = kind.answers
    assert answers is not None
    values = (answers.around[0], answers.label, answers.around[1])
    add("every candidate answer listed", kind.render(kind.listing(answers.candidates),
                                                     _LIST_WORK))
    boxes = ", ".join(f"\\boxed{{{v}}}" for v in values)
    add("several \\boxed{} with different values", f"It is one of these: {boxes}.")
    work = answers.work(answers.label)
    if kind.slot == "marker":
        add("the marker repeated", "\n".join(f"#### {v}" for v in values))
    elif kind.slot == "plain":
        lines = [kind.render(kind.shown(v), "").strip() for v in values]
        add("the answer stated three times", "\n".join(lines))
    if kind.slot == "marker":
        add("the marker with nothing after it", f"{work}\n####")
    elif kind.slot == "boxed":
        add("an empty \\boxed{} after the work", f"{work}\nSo the answer is \\boxed{{}}.")
        add("no box at all", f"{work}\nThe answer is {answers.label}.")


def _tag_soup(tag: str) -> list[tuple[str, str]]:
    opening, closing = f"<{tag}>", f"</{tag}>"
    thought = NUMBER.work(NUMBER.label)
    answer = "The answer is 42."
    return [
        ("mismatched closing tag", f"{opening}{thought}</{tag}ing>\n{answer}"),
        ("closing tag before the opening tag", f"{closing}{thought}{opening}\n{answer}"),
        ("nested tags", f"{opening}{opening}{thought}{closing}{closing}\n{answer}"),
        ("opening tag never closed", f"{opening}{thought}\n{answer}"),
        ("an empty thought", f"{opening}{closing}\n{answer}"),
        ("two thought blocks", f"{opening}{thought}{closing}{opening}{thought}{closing}\n{answer}"),
        ("the answer only inside the tags", f"{opening}{thought} {answer}{closing}"),
        ("text before the opening tag", f"{answer}\n{opening}{thought}{closing}\n{answer}"),
    ]
