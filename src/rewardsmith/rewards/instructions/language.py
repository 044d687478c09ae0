"""Language detection: langdetect's verdicts, seeded, with its sampling loop on numpy arrays.

langdetect picks n-grams of the text at random and multiplies each language's probability by
the n-gram's weight, normalizing after every fifth pick, in seven trials. Unseeded, the same
text can get different languages on different calls; here the seed is 0 (what langdetect's own
docs advise), on a private factory, so nothing global changes.

The loop here gives langdetect's results bit for bit, faster: the random picks come from the
same Mersenne Twister stream as Python's ``random.Random(0)`` (read in blocks through numpy's
MT19937, with the same rejection rule as ``Random.choice`` and the same ``gauss``), and each
probability gets the same multiplications in the same order (five rows at a time through
``multiply.reduce``, which runs row by row), normalized with Python's own ``sum``. Text
preparation and n-gram extraction give langdetect's own n-grams in its order, with patterns and
a table where langdetect calls a function per character. Tests compare the two on many texts.

For a verdict alone (``detect_language``), the trials stop once the leading language's lead is
more than the remaining trials could take away: the language named is the one all seven trials
would name, the probabilities are not computed past that point.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, TypeVar

import numpy as np

__all__ = ["detect_language", "known_languages"]

_SEED = 0
_MAX_UPDATES_PAST_FIRST = 1000  # langdetect's ITERATION_LIMIT
_BLOCK = 96  # picks drawn at a time: 1 + 5 * 19 updates, what most trials need
_SPACES = re.compile(" {2,}")
_T = TypeVar("_T")
_LATIN = re.compile("[A-z]")  # langdetect's 'A' <= ch <= 'z', punctuation between included
_NON_LATIN = re.compile("[\u0300-\u1dff\u1f00-\U0010ffff]")


@lru_cache(maxsize=1)
def _factory() -> Any:
    from langdetect.detector_factory import PROFILES_DIRECTORY, DetectorFactory

    factory = DetectorFactory()
    factory.load_profile(PROFILES_DIRECTORY)
    factory.set_seed(_SEED)
    return factory


@lru_cache(maxsize=4)
def _seeded_words(count: int) -> Any:
    """The first ``count`` 32-bit outputs of ``random.Random(0)``: every detection starts there."""
    key = random.Random(_SEED).getstate()[1]
    bits = np.random.MT19937()
    bits.state = {"bit_generator": "MT19937",
                  "state": {"key": np.array(key[:624], dtype=np.uint32), "pos": key[624]}}
    words = bits.random_raw(count)
    words.flags.writeable = False
    return words


_FIRST_WORDS = 1 << 15  # seven trials of up to 1,001 picks each rarely need more


class _Stream:
    """The output of ``random.Random(0)``, as ``random()``, ``gauss()`` and ``choice()`` use it."""

    def __init__(self) -> None:
        self._words = _seeded_words(_FIRST_WORDS)
        self._at = 0
        self._gauss_next: float | None = None

    def _have(self, count: int) -> None:
        if self._at + count > len(self._words):
            size = len(self._words)
            while size < self._at + count:
                size *= 4
            self._words = _seeded_words(size)

    def _word(self) -> int:
        self._have(1)
        word = int(self._words[self._at])
        self._at += 1
        return word

    def random(self) -> float:
        high, low = self._word() >> 5, self._word() >> 6
        return (high * 67108864.0 + low) * (1.0 / 9007199254740992.0)

    def gauss(self) -> float:
        value, self._gauss_next = self._gauss_next, None
        if value is None:
            angle = self.random() * (2.0 * math.pi)
            radius = math.sqrt(-2.0 * math.log(1.0 - self.random()))
            value = math.cos(angle) * radius
            self._gauss_next = math.sin(angle) * radius
        return value

    def picks(self, size: int, count: int, ahead: int = 0) -> tuple[Any, Any]:
        """The next ``count`` picks of ``choice`` from a list of ``size``, starting ``ahead``
        words past the current position (without using them): the indices, and after each pick
        how many words past that start it has used in all."""
        shift = np.uint64(32 - size.bit_length())
        want = 2 * count + 64
        while True:
            self._have(ahead + want)
            start = self._at + ahead
            drawn = self._words[start:start + want] >> shift
            kept = np.flatnonzero(drawn < size)
            if len(kept) >= count:
                kept = kept[:count]
                return drawn[kept].astype(np.intp), kept + 1
            want *= 2

    def skip(self, words: int) -> None:
        self._at += words


def _decided(total: Any, remaining: int, trials: int) -> bool:
    """Whether the leading language of ``total`` stays first whatever the remaining trials give.

    Each trial adds its probabilities (at most 1, summing to 1) over ``trials``, so it can cut
    the leader's lead over any other language by at most 1 / ``trials``. A lead larger than
    what the remaining trials could take away (with room for rounding) decides the verdict, and
    the leader is then past langdetect's 0.1 reporting threshold too: its sum is at least its
    lead, over 1 / ``trials``.
    """
    if remaining == 0 or remaining * 2 >= trials:
        return remaining == 0  # a lead can only pass remaining / trials past half the trials
    second, first = np.partition(total, -2)[-2:]
    return bool(first - second > remaining / trials + 1e-9)


class _NormalTable(dict[int, str]):
    """``str.translate`` table of langdetect's ``NGram.normalize``, filled as characters appear."""

    def __init__(self, normalize: Callable[[str], str]) -> None:
        super().__init__()
        self._normalize = normalize

    def __missing__(self, code: int) -> str:
        char: str = self._normalize(chr(code))
        self[code] = char
        return char


def _known_grams(normalized: str, index: Mapping[str, _T]) -> list[_T]:
    """What ``index`` holds for each n-gram langdetect takes from ``normalized`` text and finds
    in its profiles (``index``'s keys), in langdetect's order.

    langdetect's n-gram buffer starts over after each space, so runs of spaces count as one
    and the text starts after a space. At each character it takes the 1-, 2- and 3-gram ending
    there (the 3-gram only once the buffer holds three characters), none where the character
    and the one before are both capitals (its capital-word rule).
    """
    found: list[_T] = []
    add, get = found.append, index.get
    before2, before = "", " "
    for char in _SPACES.sub(" ", " " + normalized)[1:]:
        if char.isupper() and before.isupper():
            before2, before = before, char
            continue
        if char != " ":
            value = get(char)
            if value is not None:
                add(value)
        pair = before + char
        value = get(pair)
        if value is not None:
            add(value)
        if before != " ":
            value = get(before2 + pair)
            if value is not None:
                add(value)
        before2, before = before, char
    return found


@lru_cache(maxsize=1)
def _detector_class() -> Any:
    from langdetect.detector import Detector
    from langdetect.lang_detect_exception import ErrorCode, LangDetectException

    factory = _factory()
    grams = list(factory.word_lang_prob_map)
    row_of = {gram: row for row, gram in enumerate(grams)}
    table = np.array([factory.word_lang_prob_map[g] for g in grams], dtype=np.float64)

    from langdetect.utils.ngram import NGram

    itself = {gram: gram for gram in grams}
    normal = _NormalTable(NGram.normalize)

    class ArrayDetector(Detector):  # type: ignore[misc]
        # Set for a verdict alone: the trials stop once no remaining trial can change which
        # language leads, and ``langprob`` then holds the sums of the trials run.
        stop_when_decided = False

        def __init__(self, factory: Any) -> None:
            # Detector's own, less the unseeded random.Random() it makes (seeding it from the
            # system takes longer than a short detection): only langdetect's loop reads it.
            self.word_lang_prob_map = factory.word_lang_prob_map
            self.langlist = factory.langlist
            self.seed = factory.seed
            self.text = ""
            self.langprob = None
            self.alpha = self.ALPHA_DEFAULT
            self.n_trial = 7
            self.max_text_length = 10000
            self.prior_map = None
            self.verbose = False

        def append(self, text: str) -> None:
            text = self.URL_RE.sub(" ", text)
            text = self.MAIL_RE.sub(" ", text)
            text = NGram.normalize_vi(text)
            # langdetect drops each space that follows a space, over the first max chars.
            self.text += _SPACES.sub(" ", text[:self.max_text_length])

        def cleaning_text(self) -> None:
            # langdetect's count of Latin letters ('A' to 'z') against other letters (from
            # U+0300, less the Latin Extended Additional block), by pattern instead of a loop.
            latin = len(_LATIN.findall(self.text))
            if latin * 2 < len(_NON_LATIN.findall(self.text)):
                self.text = _LATIN.sub("", self.text)

        def _extract_ngrams(self) -> list[str]:
            # NGram.add_char and get(1..3) over the whole normalized text: the same n-grams
            # in the same order (the random picks index them).
            return _known_grams(self.text.translate(normal), itself)

        def _detect_block(self) -> None:
            self.cleaning_text()
            # The n-grams as their rows in ``table``, in the order _extract_ngrams gives them.
            found = _known_grams(self.text.translate(normal), row_of)
            if not found:
                raise LangDetectException(ErrorCode.CantDetectError, "No features in text.")
            if len(found).bit_length() > 32 or self.prior_map is not None:
                self.random = random.Random()  # seeded by langdetect's loop
                super()._detect_block()  # past what the block reader mirrors
                return
            rows = np.array(found, dtype=np.intp)
            count, trials, size = len(self.langlist), self.n_trial, len(found)
            divide, reduce = np.divide, np.multiply.reduce
            limit, converged = _MAX_UPDATES_PAST_FIRST + 1, self.CONV_THRESHOLD
            total = np.zeros(count)
            stream = _Stream()
            for trial in range(trials):
                prob = np.full(count, 1.0 / count)
                weight = (self.alpha + stream.gauss() * self.ALPHA_WIDTH) / self.BASE_FREQ
                # Row u of ``factors`` holds update u's factors (weight + p, as langdetect adds
                # them); picks are drawn in blocks as the updates need them.
                picked, used = stream.picks(size, _BLOCK)
                factors = weight + table[rows[picked]]
                np.multiply(prob, factors[0], out=prob)
                done, fetched = 1, _BLOCK  # updates made; langdetect checks after the first
                # update, then after every fifth
                while True:
                    values = prob.tolist()  # Python's own sum, as langdetect adds them; the
                    mass = sum(values)  # largest share is the largest value over the sum
                    if max(values) / mass > converged or done >= limit:
                        prob /= mass
                        break
                    if done + 5 > fetched:
                        picked, more = stream.picks(size, 2 * _BLOCK, int(used[-1]))
                        used = np.concatenate((used, more + used[-1]))
                        factors = np.concatenate((factors, weight + table[rows[picked]]))
                        fetched = len(factors)
                    # The normalized product takes the place of a used row.
                    divide(prob, mass, out=factors[done - 1])
                    reduce(factors[done - 1:done + 5], axis=0, out=prob)
                    done += 5
                stream.skip(int(used[done - 1]))
                total += prob / trials
                if self.stop_when_decided and _decided(total, trials - trial - 1, trials):
                    break
            self.langprob = total.tolist()

    return ArrayDetector


@lru_cache(maxsize=1)
def known_languages() -> frozenset[str]:
    """The language codes the detector can name ("en", "zh-cn", ...) and their base codes."""
    codes = set(_factory().get_lang_list())
    return frozenset(codes | {code.split("-")[0] for code in codes})


def detect_language(text: str) -> str | None:
    """The language code langdetect (seed 0) gives ``text``, or None when it cannot tell."""
    from langdetect.lang_detect_exception import LangDetectException

    detector = _detector_class()(_factory())
    detector.stop_when_decided = True
    detector.append(text)
    try:
        code: str = detector.detect()
    except LangDetectException:
        return None
    return None if code == "unknown" else code
