"""Language detection gives langdetect's own results (seed 0), probability for probability."""

from __future__ import annotations

import random

import langdetect
import numpy as np
import pytest
from langdetect.detector_factory import PROFILES_DIRECTORY, DetectorFactory
from langdetect.lang_detect_exception import LangDetectException

from rewardsmith.rewards.instructions.language import (
    _detector_class,
    _factory,
    detect_language,
    known_languages,
)

SAMPLES = [
    "The river bends twice before it reaches the old mill.",
    "THE RIVER BENDS TWICE BEFORE IT REACHES THE OLD MILL.",
    "the river bends twice before it reaches the old mill.",
    "Der Fluss fließt an der alten Mühle vorbei und die Kinder spielen am Ufer.",
    "La rivière passe près du vieux moulin et les enfants jouent sur la rive.",
    "El río pasa junto al viejo molino y los niños juegan en la orilla.",
    "Il fiume scorre accanto al vecchio mulino.",
    "Река течёт мимо старой мельницы, и дети играют на берегу.",
    "川は古い水車小屋のそばを流れ、子どもたちは毎晩岸辺で遊びます。",
    "河流流过古老的磨坊，孩子们每天晚上在岸边玩耍。",
    "강은 오래된 방앗간 옆을 흐릅니다.",
    "नदी पुरानी चक्की के पास से बहती है।",
    "Sông chảy qua cối xay cũ và trẻ em chơi trên bờ mỗi tối.",  # Vietnamese, normalized
    "Râul trece pe lângă moară; și țăranii știu asta.",  # Romanian comma-below letters
    "ok",
    "Visit https://example.com/a?b=c or mail someone@example.org today please.",
    "12345 678",
    "",
    "   ",
    "Mixed: the river and der Fluss and la rivière flow together here.",
    "ab " * 4000,  # past langdetect's 10,000-character cut
]


def _reference_factory() -> DetectorFactory:
    factory = DetectorFactory()
    factory.load_profile(PROFILES_DIRECTORY)
    factory.set_seed(0)
    return factory


REFERENCE = _reference_factory()


def _reference(text: str) -> tuple[str | None, list[tuple[str, float]] | None]:
    detector = REFERENCE.create()
    detector.append(text)
    try:
        probabilities = detector.get_probabilities()
    except LangDetectException:
        return None, None
    found = [(p.lang, p.prob) for p in probabilities]
    return (found[0][0] if found else None), found


def _ours(text: str) -> list[tuple[str, float]] | None:
    detector = _detector_class()(_factory())
    detector.append(text)
    try:
        return [(p.lang, p.prob) for p in detector.get_probabilities()]
    except LangDetectException:
        return None


@pytest.mark.parametrize("text", SAMPLES)
def test_same_language_and_same_probabilities_as_langdetect(text: str) -> None:
    language, probabilities = _reference(text)
    assert detect_language(text) == language
    assert _ours(text) == probabilities  # exactly equal floats, not close ones


def test_random_texts_agree_with_langdetect() -> None:
    rng = random.Random(7)
    words = " ".join(SAMPLES[:14]).split()
    for _ in range(60):
        text = " ".join(rng.choice(words) for _ in range(rng.randint(1, 40)))
        if rng.random() < 0.3:
            text = text.upper()
        assert _ours(text) == _reference(text)[1], text


def test_the_global_langdetect_state_is_left_alone() -> None:
    seed_before = DetectorFactory.seed
    shared_before = langdetect.detector_factory._factory
    detect_language("The river bends twice.")
    assert DetectorFactory.seed == seed_before
    assert langdetect.detector_factory._factory is shared_before  # its own factory, not this


def test_known_languages_include_base_codes() -> None:
    codes = known_languages()
    assert {"en", "de", "zh-cn", "zh-tw", "zh"} <= codes
    assert "xx" not in codes


def _random_text(rng: random.Random) -> str:
    """Text that exercises every branch of langdetect's text preparation: scripts, capitals,
    runs of spaces, punctuation, digits, URLs, Vietnamese combining marks."""
    pieces = [*" ".join(SAMPLES[:14]).split(), "HELLO", "NASA", "ÉCOLE", "McDONALD", "iPhone",
              "a", "I", "1984", "—", "...", "  ", "\n\n", "\t", "x@y.org", "http://a.b/c",
              "e\u0301", "Vie\u0323t", "ǅemal", "ß", "ΣΊΣΥΦΟΣ", "カタカナ", "ひらがな", "ㄅㄆ",
              "한국어", "یک", "\u00a0", "«»", "!", ","]
    words = [rng.choice(pieces) for _ in range(rng.randint(0, 30))]
    return "".join(word + rng.choice(["", " ", " ", "  ", ", "]) for word in words)


def test_text_preparation_matches_langdetect() -> None:
    # Cleaning (Latin letters dropped from mostly non-Latin text) and n-gram extraction, word
    # by word, give langdetect's own n-grams in its own order: the random picks index them.
    rng = random.Random(3)
    for _ in range(400):
        text = _random_text(rng)
        ours = _detector_class()(_factory())
        theirs = REFERENCE.create()
        for detector in (ours, theirs):
            detector.append(text)
            detector.cleaning_text()
        assert ours.text == theirs.text, text
        assert ours._extract_ngrams() == theirs._extract_ngrams(), text


def test_verdicts_stop_early_and_still_match_langdetect() -> None:
    rng = random.Random(5)
    stopped = 0
    for _ in range(60):
        text = _random_text(rng)
        assert detect_language(text) == _reference(text)[0], text
        detector = _detector_class()(_factory())
        detector.stop_when_decided = True
        detector.append(text)
        try:
            detector.detect()
        except LangDetectException:
            continue
        stopped += sum(detector.langprob) < 0.99  # only the trials run were added
    assert stopped > 0


def test_a_lead_decides_only_when_the_remaining_trials_cannot_undo_it() -> None:
    from rewardsmith.rewards.instructions.language import _decided

    four_of_seven = np.array([4 / 7 - 0.01, 0.01, 0.0])  # lead 0.56 > 3/7
    assert _decided(four_of_seven, remaining=3, trials=7)
    close = np.array([2.3 / 7, 1.7 / 7, 0.0])  # lead 0.6/7 < 3/7
    assert not _decided(close, remaining=3, trials=7)
    assert not _decided(np.array([3 / 7, 0.0]), remaining=4, trials=7)  # cannot decide yet
    assert _decided(np.array([0.2, 0.8]), remaining=0, trials=7)  # every trial run
