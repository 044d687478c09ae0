"""A rubric resolves private copies: the Component objects a user passes are never changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from rewardsmith import Component, Engine, Rollout, Rubric


def test_one_component_in_two_rubrics_gets_each_rubrics_timeout() -> None:
    shared = Component("c", "marker", params={"marker": "####"})
    quick = Rubric([shared], timeout=5.0)
    patient = Rubric([shared], timeout=7.0)
    assert quick.components[0].timeout == 5.0
    assert patient.components[0].timeout == 7.0
    # The same identity as a component declared for that rubric alone: stored results match.
    alone = Rubric([Component("c", "marker", params={"marker": "####"})], timeout=7.0)
    assert patient.components[0].identity() == alone.components[0].identity()
    assert quick.components[0].identity() != patient.components[0].identity()


def test_the_users_component_is_left_as_it_was() -> None:
    shared = Component("c", "marker", params={"marker": "####"})
    before = repr(shared)
    rubric = Rubric([shared], timeout=5.0)
    assert repr(shared) == before
    assert shared.timeout is None and shared.func is None and shared.spec == ""
    assert rubric.components[0] is not shared
    rubric.components[0].params["marker"] = "Answer:"  # the copy's params are its own
    assert shared.params == {"marker": "####"}


def test_the_users_list_is_left_as_it_was() -> None:
    parts = [Component("a", "marker"), Component("b", "gsm8k")]
    rubric = Rubric(parts)
    assert rubric.components is not parts
    assert all(c.func is None for c in parts)


def test_a_resolved_component_taken_into_another_rubric_starts_from_its_declaration() -> None:
    first = Rubric([Component("c", "marker")], timeout=5.0)
    second = Rubric(first.components, timeout=9.0)
    assert second.components[0].timeout == 9.0
    assert first.components[0].timeout == 5.0
    declared = Rubric([Component("c", "marker", timeout=2.0)], timeout=5.0)
    assert Rubric(declared.components, timeout=9.0).components[0].timeout == 2.0


def test_a_file_reward_keeps_the_text_the_user_wrote(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "mine.py").write_text("def graded(completion):\n    return 0.5\n")
    monkeypatch.chdir(tmp_path)
    shared = Component("mine", "mine.py:graded")
    rubric = Rubric([shared])
    assert shared.reward == "mine.py:graded"
    assert rubric.components[0].reward == f"{(tmp_path / 'mine.py').resolve()}:graded"
    with Engine(rubric, workers=0) as engine:
        [score] = engine.score([Rollout("1", "g", "q", "text", None)])
    assert score.reward == 0.5
