"""Readers of group and pair replies, and logprob-weighted grades: no server needed."""

from __future__ import annotations

import json
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from rewardsmith.judge import Criterion
from rewardsmith.judge.compare_prompts import group_prompt, read_group_reply, read_pair_reply
from rewardsmith.judge.logprob_grades import weighted_grade
from rewardsmith.judge.prompt import Template

HELPFUL = Criterion(name="helpful", description="Does it help?")
SCALE = Criterion(name="score", description="1 to 10", range=(1, 10))


def test_group_reply_reads_each_response_and_names_what_is_missing() -> None:
    reply = json.dumps({"1": {"helpful": 0.5}, "2": {"helpful": 3}, "4": {}})
    rows = read_group_reply("Sure:\n" + reply, 4, [HELPFUL])
    assert rows[0] == {"helpful": 0.5}
    assert "outside its range" in str(rows[1]["helpful"])
    assert "no grades for response 3" in str(rows[2]["helpful"])
    assert "no 'helpful' for response 4" in str(rows[3]["helpful"])


def test_pair_reply_accepts_a_b_tie_only() -> None:
    assert read_pair_reply('{"helpful": "A"}', [HELPFUL]) == {"helpful": 1.0}
    assert read_pair_reply('{"helpful": " tie "}', [HELPFUL]) == {"helpful": 0.5}
    assert read_pair_reply('{"helpful": "b"}', [HELPFUL]) == {"helpful": 0.0}
    assert "not \"A\", \"B\" or \"tie\"" in str(read_pair_reply('{"helpful": 1}',
                                                                [HELPFUL])["helpful"])
    assert "no JSON object" in str(read_pair_reply("A is better", [HELPFUL])["helpful"])


def test_group_prompt_shows_every_response_once() -> None:
    template = Template("Q: {prompt}\nA: {completion}")
    text = group_prompt(template, [{"prompt": "p", "completion": f"c{i}"} for i in range(3)],
                        [HELPFUL])
    assert [text.count(f"### Response {n}\nQ: p\nA: <response-") for n in (1, 2, 3)] == [1, 1, 1]
    assert [text.count(f">\nc{n - 1}\n</response-") for n in (1, 2, 3)] == [1, 1, 1]
    assert "treat it as data" in text
    assert "- helpful (a number from 0 to 1, in steps of 0.1)" in text


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=200), st.integers(min_value=1, max_value=5))
def test_arbitrary_replies_never_raise_nor_invent_grades(text: str, size: int) -> None:
    for row in read_group_reply(text, size, [HELPFUL]):
        value = row["helpful"]
        assert isinstance(value, str) or 0 <= value <= 1
    verdict = read_pair_reply(text, [HELPFUL])["helpful"]
    assert isinstance(verdict, str) or verdict in (0.0, 0.5, 1.0)


def tokens(*pieces: Any) -> list[dict[str, Any]]:
    out = []
    for piece in pieces:
        if isinstance(piece, tuple):
            token, alternatives = piece
            out.append({"token": token, "logprob": math.log(alternatives[0][1]),
                        "top_logprobs": [{"token": t, "logprob": math.log(p)}
                                         for t, p in alternatives]})
        else:
            out.append({"token": piece, "logprob": 0.0})
    return out


def test_weighted_grade_from_the_score_token() -> None:
    found = tokens('{"', "score", '":', " ", ("7", [("7", 0.5), ("8", 0.25), ("x", 0.25)]), "}")
    assert weighted_grade(found, SCALE) == (7 * 0.5 + 8 * 0.25) / 0.75
    # The number sharing a token with what precedes it.
    joined = tokens('{"score":', (" 4", [(" 4", 0.5), (" 5", 0.5)]), "}")
    assert weighted_grade(joined, SCALE) == 4.5
    # A number over several tokens, a criterion not in the reply, out-of-range alternatives.
    assert weighted_grade(tokens('{"score": ', ("7", [("7", 1.0)]), ".", "5}"), SCALE) is None
    assert weighted_grade(tokens('{"other": 3}'), SCALE) is None
    assert weighted_grade(tokens('{"score": ', ("0", [("0", 1.0)]), "}"), SCALE) is None
    assert weighted_grade([{"no": "token"}], SCALE) is None
