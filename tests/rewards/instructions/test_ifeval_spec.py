"""Reading IFEval constraints from the answer: the accepted forms, and every bad input named."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rewardsmith import Component, Rollout, Rubric, Status, score_rollouts
from rewardsmith.rewards import get_builtin
from rewardsmith.rewards.instructions import ifeval, parse_instructions

ANSWER = {"instruction_id_list": ["keywords:frequency", "punctuation:no_comma"],
          "kwargs": [{"keyword": "river", "frequency": 2, "relation": "at least"}, {}]}


def test_the_forms_datasets_use_read_alike() -> None:
    plain = parse_instructions(ANSWER)
    assert parse_instructions(json.dumps(ANSWER)) == plain  # a JSON string
    assert parse_instructions([ANSWER]) == plain  # a one-element list around it
    assert parse_instructions(json.dumps([ANSWER])) == plain
    # The published IFEval rows pad every kwargs object with all names set to null.
    padded = {"instruction_id_list": ANSWER["instruction_id_list"],
              "kwargs": [{**ANSWER["kwargs"][0], "num_words": None, "language": None},
                         {"keyword": None, "relation": None}]}
    assert parse_instructions(padded) == plain
    assert parse_instructions({**ANSWER, "key": 1001, "prompt": "..."}) == plain
    counts_as_floats = {"instruction_id_list": ["keywords:frequency"],
                        "kwargs": [{"keyword": " river ", "frequency": 2.0,
                                    "relation": "at least"}]}
    [parsed] = parse_instructions(counts_as_floats)
    assert parsed.kwargs == {"keyword": "river", "frequency": 2, "relation": "at least"}


def test_instructions_without_kwargs_may_leave_them_out() -> None:
    answer = {"instruction_id_list": ["punctuation:no_comma", "startend:quotation"]}
    assert [i.id for i in parse_instructions(answer)] == answer["instruction_id_list"]


@pytest.mark.parametrize(("answer", "message"), [
    (None, "the answer is missing"),
    ("", "not JSON"),
    ("not json", "not JSON"),
    (42, "got int"),
    ({"kwargs": []}, "no 'instruction_id_list'"),
    ({"instruction_id_list": "punctuation:no_comma"}, "must be a non-empty list"),
    ({"instruction_id_list": []}, "must be a non-empty list"),
    ({"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{}, {}]},
     "1 instruction id(s) but 2 kwargs"),
    ({"instruction_id_list": ["punctuation:no_comma"], "kwargs": "{}"}, "'kwargs' must be a list"),
    ({"instruction_id_list": ["keywords:telepathy"], "kwargs": [{}]},
     "instruction 0: unknown instruction id 'keywords:telepathy'"),
    ({"instruction_id_list": ["punctuation:no_comma", 7], "kwargs": [{}, {}]},
     "instruction 1: unknown instruction id 7"),
    ({"instruction_id_list": ["punctuation:no_comma"], "kwargs": [{"num_words": 5}]},
     "(punctuation:no_comma): takes no kwarg(s) 'num_words'"),
    ({"instruction_id_list": ["keywords:frequency"], "kwargs": [{"keyword": "x"}]},
     "missing kwarg(s) 'frequency', 'relation'"),
    ({"instruction_id_list": ["keywords:frequency"],
      "kwargs": [{"keyword": "x", "frequency": 2, "relation": "at most"}]},
     "kwarg 'relation': expected one of 'less than', 'at least', got 'at most'"),
    ({"instruction_id_list": ["keywords:frequency"],
      "kwargs": [{"keyword": "x", "frequency": 2.5, "relation": "at least"}]},
     "kwarg 'frequency': expected a whole number >= 0, got 2.5"),
    ({"instruction_id_list": ["keywords:frequency"],
      "kwargs": [{"keyword": "x", "frequency": True, "relation": "at least"}]},
     "kwarg 'frequency'"),
    ({"instruction_id_list": ["keywords:frequency"],
      "kwargs": [{"keyword": "  ", "frequency": 1, "relation": "at least"}]},
     "kwarg 'keyword': expected a non-empty string"),
    ({"instruction_id_list": ["keywords:existence"], "kwargs": [{"keywords": "river"}]},
     "kwarg 'keywords': expected a non-empty list of strings"),
    ({"instruction_id_list": ["keywords:letter_frequency"],
      "kwargs": [{"letter": "ab", "let_frequency": 1, "let_relation": "at least"}]},
     "kwarg 'letter': expected one character (such as 'a' or '#')"),
    ({"instruction_id_list": ["language:response_language"], "kwargs": [{"language": "xx"}]},
     "kwarg 'language': expected a language code"),
    ({"instruction_id_list": ["length_constraints:nth_paragraph_first_word"],
      "kwargs": [{"num_paragraphs": 2, "nth_paragraph": 3, "first_word": "a"}]},
     "nth_paragraph 3 is past num_paragraphs 2"),
    ({"instruction_id_list": ["length_constraints:number_paragraphs"],
      "kwargs": [{"num_paragraphs": 0}]}, "expected a whole number >= 1"),
    ({"instruction_id_list": ["punctuation:no_comma"], "kwargs": ["none"]},
     "kwargs must be an object"),
])
def test_bad_constraints_are_errors_that_name_what_is_wrong(answer: Any, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_instructions(answer)
    assert message in str(caught.value)
    assert str(caught.value).startswith("ifeval:")


def test_bad_params_are_errors() -> None:
    with pytest.raises(ValueError, match="mode must be 'fraction' or 'all'"):
        ifeval("text", ANSWER, mode="any")
    with pytest.raises(ValueError, match="loose must be true or false"):
        ifeval("text", ANSWER, loose="yes")  # type: ignore[arg-type]


def test_ifeval_through_a_rubric_and_the_engine() -> None:
    builtin = get_builtin("ifeval")
    assert builtin is not None and builtin.kind == "verifier"
    rubric = Rubric([Component("follows", "ifeval"),
                     Component("follows_loose", "ifeval", params={"loose": True}, weight=0.0)])
    rollouts = [
        Rollout(id="met", group="g", prompt="Write about rivers.",
                completion="The river and the river again.", answer=json.dumps(ANSWER)),
        Rollout(id="half", group="g", prompt="Write about rivers.",
                completion="The river and the river, twice.", answer=ANSWER),
        Rollout(id="chat", group="g", prompt="Write about rivers.",
                completion=[{"role": "assistant", "content": "A river, a river."}],
                answer=ANSWER),
        Rollout(id="bad", group="g", prompt="Write about rivers.", completion="The river.",
                answer={"instruction_id_list": ["keywords:telepathy"], "kwargs": [{}]}),
    ]
    scores = {s.id: s for s in score_rollouts(rubric, rollouts, workers=0)}
    assert scores["met"].reward == 1.0 and scores["met"].status is Status.OK
    assert scores["half"].reward == 0.5
    assert scores["chat"].reward == 0.5  # a comma
    assert scores["bad"].status is Status.ERROR
    assert "unknown instruction id 'keywords:telepathy'" in scores["bad"].errors["follows"]
