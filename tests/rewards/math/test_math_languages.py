"""Final answers in other languages: cue words, units in their script, digits of any script.

Hand-written solutions in Chinese, Japanese, French, Spanish, German, Russian, Arabic and Hindi,
each with a number after the answer (a difference, a month count, a price) that a last-number
reader would take instead; and the hedges that must earn nothing in any language.
"""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rewardsmith.mathcheck import math_equal
from rewardsmith.rewards.mathanswer.extraction import extract_answer

RIGHT = [
    # Chinese: answer words, conclusion words, units (个, 元, 吨) with a number after them.
    ("小明有 5 个苹果，又买了 7 个。所以他一共有 12 个苹果，比原来多 7 个。", "12"),
    ("答案：12", "12"),
    ("经过计算，答案是 $\\frac{3}{4}$。我们再检查一遍：3 和 4 互质。", "\\frac34"),
    ("因此，最终答案为 42 元，找回 8 元。", "42"),
    ("答案：每份应该是 (\\frac{2}{5}) 吨。", "0.4"),
    ("所以 x = 5。然后 5 + 3 = 8。", "8"),  # a step's "so" is not the conclusion
    ("地块面积 = 72000 / 18 = 4000千克", "4000"),
    ("计划的比例为13/28", "\\frac{13}{28}"),
    # Japanese.
    ("よって、りんごは 30 個で、みかんより 4 個多いです。", "30"),
    ("答えは 30 個です。", "30"),
    # French: "Réponse :", "donc", prices in euros.
    ("Réponse : Janeth aura encore 220 € à payer d'ici 12 mois.", "220"),
    ("Il reste donc 15 €, soit 3 € de plus qu'hier.", "15"),
    ("La réponse finale est $\\frac{1}{2}$.", "0.5"),
    ("donc 353 g - 79 g = 274 g. Donc, il a déjà 79 g de cire.", "79"),
    # Spanish, German, Russian.
    ("Respuesta: 8 manzanas, 2 más que ayer.", "8"),
    ("Die Antwort ist 25 Euro, 5 Euro mehr als gestern.", "25"),
    ("Ответ: 14 рублей, на 2 больше.", "14"),
    # Arabic, with Latin and with Arabic-Indic digits.
    ("الجواب: 92 ريالاً، أكثر بـ 8 من الأسبوع الماضي.", "92"),
    ("الجواب هو ٩٢", "92"),
    ("لذا، ناتج العملية 79 * 2 - 66 هو 92.", "92"),
    # Hindi, with Latin and with Devanagari digits.
    ("उत्तर: 67 कमीजें, जो पहले से 11 अधिक हैं।", "67"),
    ("इसलिए, दुकान में अब ६७ कमीजें हैं।", "67"),
    # English keeps its rules: the quantity stated first, then a remark.
    ("Therefore he has 12 apples, 3 more than before.", "12"),
    ("The answer is $20 dollars, 5 more than last week.", "20"),
    ("Thus the roots are 2 and 3.", "3, 2"),  # values side by side after a cue: together
]

WRONG = [
    # Hedges: two values offered, in any language, answer nothing.
    ("所以答案是 12 个或 13 个。", "12"),
    ("答案：3 或 4", "3"),
    ("Réponse : 3 ou 4", "4"),
    ("La réponse est 3, pas 4.", "3"),
    ("Answer: 12 apples or 13 apples", "12"),
    ("The answer is 2 cats and 3 dogs.", "2"),
    ("الجواب: 5 أو 6", "5"),
    ("उत्तर: 5 या 6", "6"),
    # A wrong value stays wrong, and the cue decides which number is the answer.
    ("答案是 15。", "16"),
    ("小明有 5 个苹果，又买了 7 个。所以他一共有 12 个苹果，比原来多 7 个。", "7"),
    ("Réponse : Janeth aura encore 220 € à payer d'ici 12 mois.", "12"),
    ("الجواب هو ٩٢", "93"),
    # A hedge after a conclusion word is not read for its last number.
    ("所以 0 € ou 1 €.", "1"),
    ("Therefore x = 2 or x = 3", "3"),
    # A step's "so" earlier in the text is not the answer.
    ("所以 x = 5。然后 5 + 3 = 8。", "5"),
]


@pytest.mark.parametrize(("completion", "reference"), RIGHT)
def test_the_stated_answer_is_found_in_every_language(completion: str, reference: str) -> None:
    verdict = math_equal(completion, reference)
    assert verdict.status == "ok" and verdict.equal, verdict


@pytest.mark.parametrize(("completion", "reference"), WRONG)
def test_hedges_and_other_numbers_earn_nothing(completion: str, reference: str) -> None:
    verdict = math_equal(completion, reference)
    assert verdict.status == "ok" and not verdict.equal, verdict


@pytest.mark.parametrize(("completion", "answer", "source"), [
    ("答案：12", "12", "answer"),
    ("Réponse : 220 € à payer d'ici 12 mois.", "220", "answer"),
    ("Il reste donc 15 €, soit 3 € de plus qu'hier.", "15", "conclusion"),
    ("所以他一共有 12 个苹果，比原来多 7 个。", "12", "conclusion"),
    ("12 个", "12", "last expression"),
])
def test_where_the_answer_came_from(completion: str, answer: str, source: str) -> None:
    found = extract_answer(completion)
    assert found is not None and (found.answers, found.source) == ((answer,), source)


def test_a_cue_word_without_a_value_does_not_hide_the_answer() -> None:
    # "réponse" in passing, and "所以" before a sentence with no number, are not answers.
    assert math_equal("Vérifions la réponse avec soin. Le total est 42.", "42").equal
    assert math_equal("所以我们要仔细计算。总数是 42。", "42").equal


def test_digits_of_every_script_are_numbers_in_references_too() -> None:
    assert math_equal("92", "٩٢").equal
    assert math_equal("\\boxed{３／４}", "0.75").status == "ok"
    assert not math_equal("92", "٩٣").equal


def test_a_math_segment_is_not_a_quantity_with_a_unit() -> None:
    # "Thus" opens the last sentence, but its first value is math followed by a word, not a
    # number with a unit: the sentence states no single value, and the last expression is read.
    found = extract_answer("Thus $x = 3$ gives the minimum value $\\frac12$.")
    assert found is not None and found.answers == ("\\frac12",)


# Property: whatever the numbers, the cue and the unit, the first stated quantity is the answer,
# and two quantities offered as alternatives answer neither.
_CUES = ["答案：", "所以", "Réponse : ", "Donc, il reste ", "الجواب: ", "उत्तर: ", "Ответ: ",
         "Respuesta: ", "Therefore he has "]
_UNITS = ["个", "€", "元", "apples", "ريالاً", "कमीजें", "рублей", "g"]
_OR = ["或", "ou", "or", "أو", "या", "или"]


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 10**6), st.integers(0, 10**6), st.sampled_from(_CUES),
       st.sampled_from(_UNITS), st.sampled_from(_OR))
def test_first_quantity_property(first: int, second: int, cue: str, unit: str,
                                 alternative: str) -> None:
    assume(first != second)
    stated = f"{cue}{first} {unit}，比昨天多 {second} {unit}。" if cue in ("答案：", "所以") else \
        f"{cue}{first} {unit}, {second} {unit} de plus."
    assert math_equal(stated, str(first)).equal, stated
    assert not math_equal(stated, str(second)).equal, stated
    hedged = f"{cue}{first} {unit} {alternative} {second} {unit}."
    assert not math_equal(hedged, str(first)).equal, hedged
    assert not math_equal(hedged, str(second)).equal, hedged
