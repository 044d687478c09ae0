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
preparation and n-gram extraction are langdetect's own code. Tests compare the two on many
texts.
"""

from __future__ import annotations

import math
import random
import re
from functools import lru_cache
from typing import Any

import numpy as np

__all__ = ["detect_language", "known_languages"]

_SEED = 0
_MAX_UPDATES_PAST_FIRST = 1000  # langdetect's ITERATION_LIMIT
_BLOCK = 56  # factor rows fetched at a time: 1 + 5 * 11
_SPACES = re.compile(" {2,}")


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

    def picks(self, size: int, count: int) -> tuple[Any, Any]:
        """The next ``count`` picks of ``choice`` from a list of ``size`` (without using them):
        the indices, and after each pick how many words it has used in all."""
        shift = np.uint64(32 - size.bit_length())
        want = 2 * count + 64
        while True:
            self._have(want)
            drawn = self._words[self._at:self._at + want] >> shift
            kept = np.flatnonzero(drawn < size)
            if len(kept) >= count:
                kept = kept[:count]
                return drawn[kept].astype(np.intp), kept + 1
            want *= 2

    def skip(self, words: int) -> None:
        self._at += words


@lru_cache(maxsize=1)
def _detector_class() -> Any:
    from langdetect.detector import Detector
    from langdetect.lang_detect_exception import ErrorCode, LangDetectException

    factory = _factory()
    grams = list(factory.word_lang_prob_map)
    row_of = {gram: row for row, gram in enumerate(grams)}
    table = np.array([factory.word_lang_prob_map[g] for g in grams], dtype=np.float64)

    from langdetect.utils.ngram import NGram

    normalized = lru_cache(maxsize=None)(NGram.normalize)  # a pure function of one character

    class ArrayDetector(Detector):  # type: ignore[misc]
        def append(self, text: str) -> None:
            text = self.URL_RE.sub(" ", text)
            text = self.MAIL_RE.sub(" ", text)
            text = NGram.normalize_vi(text)
            # langdetect drops each space that follows a space, over the first max chars.
            self.text += _SPACES.sub(" ", text[:self.max_text_length])

        def _extract_ngrams(self) -> list[str]:
            # NGram.add_char and get(1..3) inlined: the same grams, in the same order.
            known = self.word_lang_prob_map
            found: list[str] = []
            grams, capital = " ", False
            for raw in self.text:
                char = normalized(raw)
                last = grams[-1]
                if last == " ":
                    grams, capital = " ", False
                    if char == " ":
                        continue
                elif len(grams) >= 3:
                    grams = grams[1:]
                grams += char
                if char.isupper():
                    if last.isupper():
                        capital = True
                else:
                    capital = False
                if capital:
                    continue
                if char != " " and char in known:
                    found.append(char)
                if len(grams) >= 2:
                    pair = grams[-2:]
                    if pair in known:
                        found.append(pair)
                    if len(grams) == 3 and grams in known:
                        found.append(grams)
            return found

        def _detect_block(self) -> None:
            self.cleaning_text()
            found = self._extract_ngrams()
            if not found:
                raise LangDetectException(ErrorCode.CantDetectError, "No features in text.")
            if len(found).bit_length() > 32 or self.prior_map is not None:
                super()._detect_block()  # past what the block reader mirrors
                return
            distinct = list(dict.fromkeys(found))
            place = {gram: i for i, gram in enumerate(distinct)}
            where = np.array([place[gram] for gram in found], dtype=np.intp)
            rows = table[[row_of[gram] for gram in distinct]]
            count = len(self.langlist)
            total = np.zeros(count)
            stream = _Stream()
            for _ in range(self.n_trial):
                prob = np.full(count, 1.0 / count)
                alpha = self.alpha + stream.gauss() * self.ALPHA_WIDTH
                picked, used_words = stream.picks(len(found), 1 + _MAX_UPDATES_PAST_FIRST)
                weighted = (alpha / self.BASE_FREQ) + rows  # weight + p, as langdetect adds
                # Row u holds update u's factors; rows are fetched in blocks as they are needed.
                factors = weighted[where[picked[:_BLOCK]]]
                np.multiply(prob, factors[0], out=prob)
                done, fetched = 1, len(factors)  # updates made; langdetect checks after the
                # first update, then after every fifth
                reduce, limit, converged = np.multiply.reduce, _MAX_UPDATES_PAST_FIRST + 1, \
                    self.CONV_THRESHOLD
                while True:
                    values = prob.tolist()  # Python's own sum, as langdetect adds them; the
                    mass = sum(values)  # largest share is the largest value over the sum
                    prob /= mass
                    if max(values) / mass > converged or done >= limit:
                        break
                    if done + 5 > fetched:
                        more = weighted[where[picked[fetched:fetched + 4 * _BLOCK]]]
                        factors = np.concatenate((factors, more))
                        fetched = len(factors)
                    factors[done - 1] = prob  # a used row becomes the running product
                    reduce(factors[done - 1:done + 5], axis=0, out=prob)
                    done += 5
                stream.skip(int(used_words[done - 1]))
                total += prob / self.n_trial
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
    detector.append(text)
    try:
        code: str = detector.detect()
    except LangDetectException:
        return None
    return None if code == "unknown" else code
