"""Language detection gives langdetect's own results (seed 0), probability for probability."""

from __future__ import annotations

import random

import langdetect
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
