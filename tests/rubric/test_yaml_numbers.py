"""Rubric YAML reads exponent numbers as numbers: PyYAML's YAML 1.1 would keep `1e-6` as text."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from rewardsmith import Rubric
from rewardsmith.rubric._strict_yaml import read_yaml


@pytest.mark.parametrize(("text", "value"), [
    ("1e-6", 1e-6), ("5E3", 5000.0), ("-2.5e+2", -250.0), ("+1.5e3", 1500.0), (".5e-3", 0.0005),
    ("1_000e0", 1000.0),
])
def test_exponent_numbers_are_floats(text: str, value: float) -> None:
    read = read_yaml(f"x: {text}")["x"]
    assert isinstance(read, float) and read == value


@pytest.mark.parametrize("text", ['"1e-6"', "e5", "1e", "1e-", "v1e5"])
def test_what_is_not_a_number_stays_text(text: str) -> None:
    assert isinstance(read_yaml(f"x: {text}")["x"], str)


def test_plain_safe_load_is_left_as_it_was() -> None:
    read_yaml("x: 1e-6")
    assert yaml.safe_load("x: 1e-6") == {"x": "1e-6"}  # the resolver is ours alone


def test_a_rubric_with_exponent_numbers(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text("name: r\ncomponents:\n"
                    "  fmt: {reward: marker, params: {marker: '####'}, weight: 2.5e-1}\n",
                    encoding="utf-8")
    [component] = Rubric.from_yaml(path).components
    assert component.weight == 0.25


def test_a_float_where_a_whole_number_is_needed_names_the_key(tmp_path: Path) -> None:
    from rewardsmith.errors import RubricError

    path = tmp_path / "r.yaml"
    path.write_text("name: r\ncomponents:\n  long: {reward: length, params: {max_length: 2.5e3}}\n",
                    encoding="utf-8")
    with pytest.raises(RubricError, match="components.long.params.*max_length must be a whole"):
        Rubric.from_yaml(path)
