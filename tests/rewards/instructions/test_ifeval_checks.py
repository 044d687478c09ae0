"""Hand-labeled IFEval cases: every instruction type meets and misses its constraint, strict and
loose. Each row: instruction id, kwargs, response, strict verdict, loose verdict.

Loose mode also tries the response without its first line, its last line, both, and each with
``*`` removed; rows marked (L) pass only that way.
"""

from __future__ import annotations

from typing import Any

import pytest

from rewardsmith import Component, Rollout, Rubric, Status, score_rollouts
from rewardsmith.rewards.instructions import CHECKS, KWARGS, follows, ifeval, parse_instructions

GERMAN = "Der Fluss fließt an der alten Mühle vorbei und die Kinder spielen am Ufer."
ENGLISH = "The river bends twice before it reaches the old mill."
PREAMBLE = ("Here is the answer that you asked for today, and I really hope that it will help "
            "you with all of your homework this week.")

CASES: list[tuple[str, dict[str, Any], str, bool, bool]] = [
    # keywords
    ("keywords:existence", {"keywords": ["river", "mill"]}, "The river turns the mill.",
     True, True),
    ("keywords:existence", {"keywords": ["river", "mill"]}, "The river runs.", False, False),
    ("keywords:existence", {"keywords": ["river", "mill"]}, "The ri*ver turns the mill.",
     False, True),  # (L)
    ("keywords:existence", {"keywords": ["C++"]}, "I write C++ daily.", True, True),
    ("keywords:existence", {"keywords": ["C++"]}, "I write C daily.", False, False),
    ("keywords:frequency", {"keyword": "lantern", "frequency": 2, "relation": "at least"},
     "A lantern and another lantern.", True, True),
    ("keywords:frequency", {"keyword": "lantern", "frequency": 2, "relation": "at least"},
     "One lantern.", False, False),
    ("keywords:frequency", {"keyword": "lantern", "frequency": 2, "relation": "at least"},
     "A **lan**tern and a lantern.", False, True),  # (L)
    ("keywords:frequency", {"keyword": "lantern", "frequency": 2, "relation": "less than"},
     "Lantern light. Lantern glow.", False, False),
    ("keywords:forbidden_words", {"forbidden_words": ["cat"]}, "Cats are nice.", True, True),
    ("keywords:forbidden_words", {"forbidden_words": ["cat"]}, "My CAT sleeps.", False, False),
    ("keywords:forbidden_words", {"forbidden_words": ["cat"]}, "Note: cat\nDogs bark.",
     False, True),  # (L)
    ("keywords:letter_frequency", {"letter": "z", "let_frequency": 2,
                                   "let_relation": "at least"}, "Zoe zips.", True, True),
    ("keywords:letter_frequency", {"letter": "z", "let_frequency": 2,
                                   "let_relation": "at least"}, "Zoe naps.", False, False),
    ("keywords:letter_frequency", {"letter": "a", "let_frequency": 3,
                                   "let_relation": "less than"}, "Banana\nhi there", False,
     True),  # (L)
    # Google's data asks for "#" and "!": the character itself is counted.
    ("keywords:letter_frequency", {"letter": "#", "let_frequency": 4,
                                   "let_relation": "at least"}, "#rivers #mills #lakes #sea",
     True, True),
    ("keywords:letter_frequency", {"letter": "#", "let_frequency": 4,
                                   "let_relation": "at least"}, "#rivers #mills #lakes", False,
     False),
    ("keywords:letter_frequency", {"letter": "!", "let_frequency": 2,
                                   "let_relation": "less than"}, "Wow! Great.", True, True),
    ("keywords:letter_frequency", {"letter": "!", "let_frequency": 2,
                                   "let_relation": "less than"}, "Wow! Great!", False, False),
    ("keywords:letter_frequency", {"letter": "Z", "let_frequency": 2,
                                   "let_relation": "at least"}, "zoe ZIPS.", True, True),
    # language
    ("language:response_language", {"language": "de"}, GERMAN, True, True),
    ("language:response_language", {"language": "de"}, ENGLISH, False, False),
    ("language:response_language", {"language": "de"}, PREAMBLE + "\n" + GERMAN, False,
     True),  # (L)
    ("language:response_language", {"language": "en"}, "12345 678", False, False),
    ("language:response_language", {"language": "zh"}, "河流流过古老的磨坊。", True, True),
    # length constraints
    ("length_constraints:number_sentences", {"num_sentences": 3, "relation": "at least"},
     "Dr. Smith came. He sat. He left.", True, True),
    ("length_constraints:number_sentences", {"num_sentences": 3, "relation": "at least"},
     "Dr. Smith came. He left.", False, False),
    ("length_constraints:number_sentences", {"num_sentences": 3, "relation": "less than"},
     "An intro sentence.\nFirst one. Second one.", False, True),  # (L)
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2},
     "First part.\n***\nSecond part.", True, True),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2}, "Only one.", False, False),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2},
     "First.\n***\n***\nSecond.", False, False),  # an empty paragraph between dividers
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2},
     "First.\n***\nSecond.\n***\nThird.", False, True),  # (L)
    ("length_constraints:number_words", {"num_words": 5, "relation": "less than"},
     "Three words here.", True, True),
    ("length_constraints:number_words", {"num_words": 5, "relation": "less than"},
     "one two three four five six", False, False),
    ("length_constraints:number_words", {"num_words": 5, "relation": "less than"},
     "Here is a rather long preamble line\nTwo words", False, True),  # (L)
    ("length_constraints:nth_paragraph_first_word",
     {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "rivers"},
     "Intro text.\n\nRivers flow.", True, True),
    ("length_constraints:nth_paragraph_first_word",
     {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "rivers"},
     "Intro text.\n\nLakes rest.", False, False),
    ("length_constraints:nth_paragraph_first_word",
     {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "rivers"},
     "Intro text.\n\n**Rivers** flow.", False, True),  # (L)
    ("length_constraints:nth_paragraph_first_word",
     {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "rivers"},
     "\n\nIntro text.\n\n\"Rivers, yes.\"", True, True),  # a leading blank block is no paragraph
    # detectable content
    ("detectable_content:number_placeholders", {"num_placeholders": 2},
     "Dear [name], we live at [address].", True, True),
    ("detectable_content:number_placeholders", {"num_placeholders": 2}, "Dear [name].",
     False, False),
    ("detectable_content:number_placeholders", {"num_placeholders": 2},
     "Dear [name] at [ ] and [].", False, False),  # empty brackets hold no placeholder
    ("detectable_content:postscript", {"postscript_marker": "P.S."},
     "Hello.\n\nP.S. See you soon.", True, True),
    ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Hello.", False, False),
    ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Hello.\n\nP.S.",
     False, False),  # the marker with nothing after it
    ("detectable_content:postscript", {"postscript_marker": "P.S."},
     "Hello.\n\n**P**.S. See you soon.", False, True),  # (L)
    ("detectable_content:postscript", {"postscript_marker": "P.P.S"},
     "Hello.\n\nP. P. S. One more thing.", True, True),
    # detectable format
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "* one\n* two", True, True),
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "* one", False, False),
    ("detectable_format:number_bullet_lists", {"num_bullets": 2},
     "Two points:\n* one\n- two\n- a closing note", False, True),  # (L)
    ("detectable_format:constrained_response", {}, "My answer is yes.", True, True),
    ("detectable_format:constrained_response", {}, "Yes.", False, False),
    ("detectable_format:constrained_response", {},
     "My answer is yes. My answer is no. My answer is maybe.", False, False),  # glued
    ("detectable_format:constrained_response", {}, "My answer is yes.\nMy answer is no.",
     False, True),  # (L)
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2},
     "Some *one* and **two** here.", True, True),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2},
     "Some *one* and ** ** here.", False, False),
    ("detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 2},
     "Section 1\nApples.\nSection 2\nPears.", True, True),
    ("detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 2},
     "Section 1\nApples.", False, False),
    ("detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 2},
     "Section 1\nSection 2\n", False, False),  # headings with nothing under them
    ("detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 2},
     "**Section** 1\nApples.\nSection 2\nPears.", False, True),  # (L)
    ("detectable_format:json_format", {}, '{"a": [1, 2]}', True, True),
    ("detectable_format:json_format", {}, '```json\n{"a": 1}\n```', True, True),
    ("detectable_format:json_format", {}, "{a: 1}", False, False),
    ("detectable_format:json_format", {}, 'Here is the JSON:\n{"a": 1}', False, True),  # (L)
    ("detectable_format:title", {}, "<<Ode to Rivers>>\nWater flows.", True, True),
    ("detectable_format:title", {}, "Ode to Rivers\nWater flows.", False, False),
    ("detectable_format:title", {}, "<< >>\nWater flows.", False, False),
    # combination
    ("combination:two_responses", {}, "Apples.\n******\nPears.", True, True),
    ("combination:two_responses", {}, "Apples.\n******\nApples.", False, False),
    ("combination:two_responses", {}, "Apples.\n******\nPears.\n******\nPlums.", False,
     True),  # (L): the third is the last line
    ("combination:two_responses", {}, "Apples.\nMore.\n******\nPears.\n******\nPlums.\nFigs.",
     False, False),
    ("combination:repeat_prompt", {"prompt_to_repeat": "Write a poem."},
     "Write a poem. Roses are red.", True, True),
    ("combination:repeat_prompt", {"prompt_to_repeat": "Write a poem."}, "Roses are red.",
     False, False),
    ("combination:repeat_prompt", {"prompt_to_repeat": "Write a poem."}, "Write a poem.",
     False, False),  # the request repeated, no answer
    ("combination:repeat_prompt", {"prompt_to_repeat": "Write a poem."},
     "Sure!\nWrite a poem. Roses are red.", False, True),  # (L)
    # start / end
    ("startend:end_checker", {"end_phrase": "Any other questions?"},
     "Done. Any other questions?", True, True),
    ("startend:end_checker", {"end_phrase": "Any other questions?"},
     "Any other questions? Done.", False, False),
    ("startend:end_checker", {"end_phrase": "Any other questions?"},
     "Done. Any other questions?\n(end)", False, True),  # (L)
    ("startend:quotation", {}, '"Hello there."', True, True),
    ("startend:quotation", {}, "Hello there.", False, False),
    ("startend:quotation", {}, 'Here you go:\n"Hello there."', False, True),  # (L)
    # change case
    ("change_case:capital_word_frequency", {"capital_frequency": 2,
                                            "capital_relation": "at least"},
     "NASA and ESA launched it.", True, True),
    ("change_case:capital_word_frequency", {"capital_frequency": 2,
                                            "capital_relation": "at least"},
     "Nasa launched it.", False, False),
    ("change_case:capital_word_frequency", {"capital_frequency": 2,
                                            "capital_relation": "at least"},
     "We DON'T stop.", True, True),  # DO + N'T, as the Treebank tokenizer splits it
    ("change_case:capital_word_frequency", {"capital_frequency": 2,
                                            "capital_relation": "less than"},
     "TITLE LINE HERE\nNASA launched it.", False, True),  # (L)
    ("change_case:english_capital", {}, ENGLISH.upper(), True, True),
    ("change_case:english_capital", {}, ENGLISH, False, False),
    ("change_case:english_capital", {}, GERMAN.upper(), False, False),
    ("change_case:english_capital", {}, "Note:\n" + ENGLISH.upper(), False, True),  # (L)
    ("change_case:english_lowercase", {}, ENGLISH.lower(), True, True),
    ("change_case:english_lowercase", {}, ENGLISH, False, False),
    ("change_case:english_lowercase", {}, "Title\n" + ENGLISH.lower(), False, True),  # (L)
    # punctuation
    ("punctuation:no_comma", {}, "No commas here.", True, True),
    ("punctuation:no_comma", {}, "Yes, commas.", False, False),
    ("punctuation:no_comma", {}, "苹果，梨", False, False),  # the fullwidth comma
    ("punctuation:no_comma", {}, "Hello, friend\nNo commas here.", False, True),  # (L)
]


def _one(iid: str, kwargs: dict[str, Any], text: str, loose: bool) -> bool:
    answer = {"instruction_id_list": [iid], "kwargs": [kwargs]}
    return follows(text, parse_instructions(answer), loose=loose)[0]


@pytest.mark.parametrize(("iid", "kwargs", "text", "strict", "loose"), CASES)
def test_hand_labeled_case(iid: str, kwargs: dict[str, Any], text: str, strict: bool,
                           loose: bool) -> None:
    assert _one(iid, kwargs, text, loose=False) is strict
    assert _one(iid, kwargs, text, loose=True) is loose


def test_every_type_has_a_pass_and_a_fail_in_both_modes() -> None:
    assert set(CHECKS) == set(KWARGS) and len(CHECKS) == 25
    for iid in CHECKS:
        rows = [row for row in CASES if row[0] == iid]
        assert any(r[3] for r in rows) and any(not r[3] for r in rows), iid
        assert any(r[4] for r in rows) and any(not r[4] for r in rows), iid


# ------------------------------------------------------------------------------------ probes

EMPTY_ANSWERS = ["", "   \n\t", "{}", "***", "******", "[]"]


@pytest.mark.parametrize("text", EMPTY_ANSWERS)
@pytest.mark.parametrize("loose", [False, True])
def test_content_free_answers_meet_nothing(text: str, loose: bool) -> None:
    answer = {"instruction_id_list": ["punctuation:no_comma", "change_case:english_lowercase",
                                      "length_constraints:number_words",
                                      "change_case:capital_word_frequency",
                                      "keywords:forbidden_words"],
              "kwargs": [{}, {}, {"num_words": 50, "relation": "less than"},
                         {"capital_frequency": 3, "capital_relation": "less than"},
                         {"forbidden_words": ["river"]}]}
    result = ifeval(text, answer, loose=loose)
    assert result.value == 0.0, result


def test_a_bare_json_object_meets_json_format_and_nothing_else() -> None:
    answer = {"instruction_id_list": ["detectable_format:json_format", "punctuation:no_comma"],
              "kwargs": [{}, {}]}
    result = ifeval("{}", answer)
    assert (result.value, result.error) == (0.5, None)
    assert result.metrics == {"detectable_format:json_format": 1.0, "punctuation:no_comma": 0.0,
                              "unchecked": 0.0}


def test_the_prompt_repeated_back_earns_nothing() -> None:
    prompt = "Write about the river and the mill. End with Any other questions?"
    answer = {"instruction_id_list": ["keywords:existence", "startend:end_checker"],
              "kwargs": [{"keywords": ["river", "mill"]}, {"end_phrase": "Any other questions?"}]}
    assert ifeval(prompt, answer).value == 1.0  # without the prompt it looks fine
    echoed = "  write about the river and the MILL.\nEnd with Any other questions?  "
    assert ifeval(echoed, answer, prompt=prompt).value == 0.0
    assert ifeval(echoed, answer, prompt=prompt, loose=True).value == 0.0
    own = "The river turns the mill. Any other questions?"
    assert ifeval(own, answer, prompt=prompt).value == 1.0


def test_glued_responses_earn_no_credit() -> None:
    options = {"instruction_id_list": ["detectable_format:constrained_response"],
               "kwargs": [{}]}
    glued = "My answer is yes. My answer is no. My answer is maybe."
    assert ifeval(glued, options, loose=True).value == 0.0
    two = {"instruction_id_list": ["combination:two_responses"], "kwargs": [{}]}
    three = "Apples are red.\n******\nPears are green.\n******\nPlums are purple. Figs too."
    assert ifeval(three, two).value == 0.0
    assert ifeval("Apples are red.\n******\nApples are red.", two).value == 0.0


def test_mode_all_and_fraction_and_metrics() -> None:
    answer = {"instruction_id_list": ["punctuation:no_comma", "keywords:existence",
                                      "keywords:existence"],
              "kwargs": [{}, {"keywords": ["river"]}, {"keywords": ["lake"]}]}
    result = ifeval("The river is wide.", answer)
    assert result.value == pytest.approx(2 / 3)
    assert result.metrics == {"punctuation:no_comma": 1.0, "keywords:existence": 1.0,
                              "keywords:existence#2": 0.0, "unchecked": 0.0}
    assert ifeval("The river is wide.", answer, mode="all").value == 0.0
    answer["kwargs"][2] = {"keywords": ["wide"]}
    assert ifeval("The river is wide.", answer, mode="all").value == 1.0


def test_an_instruction_that_cannot_be_checked_leaves_the_others_graded() -> None:
    answer = {"instruction_id_list": ["punctuation:no_comma", "keywords:telepathy",
                                      "keywords:letter_frequency", "keywords:existence"],
              "kwargs": [{}, {}, {"letter": "ab", "let_frequency": 1, "let_relation": "at least"},
                         {"keywords": ["river"]}]}
    result = ifeval("The mill, by the lake.", answer)
    assert result.status is Status.OK
    assert result.value == 0.0  # both instructions that could be checked were missed
    assert result.metrics == {"punctuation:no_comma": 0.0, "keywords:existence": 0.0,
                              "unchecked": 2.0}
    assert result.error is not None
    assert result.error.startswith("ifeval: 2 of 4 instructions could not be checked")
    assert "instruction 1: unknown instruction id 'keywords:telepathy'" in result.error
    assert "instruction 2 (keywords:letter_frequency): kwarg 'letter'" in result.error
    assert ifeval("The river by the lake.", answer).value == 1.0
    assert ifeval("The river by the lake.", answer, mode="all").value == 1.0
    assert ifeval("The river, by the lake.", answer, mode="all").value == 0.0


def test_when_no_instruction_can_be_checked_the_response_is_an_error() -> None:
    answer = {"instruction_id_list": ["keywords:telepathy", "keywords:existence"],
              "kwargs": [{}, {"keywords": []}]}
    with pytest.raises(ValueError, match="telepathy.*kwarg 'keywords'"):
        ifeval("The river.", answer)


def test_unchecked_instructions_through_the_engine() -> None:
    answer = {"instruction_id_list": ["keywords:existence", "keywords:telepathy"],
              "kwargs": [{"keywords": ["river"]}, {}]}
    rubric = Rubric([Component("follows", "ifeval")])
    rollouts = [Rollout(id="r", group="g", prompt="Write.", completion="The river.",
                        answer=answer)]
    for workers in (0, 1):
        (scored,) = score_rollouts(rubric, rollouts, workers=workers)
        assert (scored.reward, scored.status) == (1.0, Status.OK)
        assert scored.metrics == {"follows.keywords:existence": 1.0, "follows.unchecked": 1.0}
        assert "keywords:telepathy" in scored.errors["follows"]
