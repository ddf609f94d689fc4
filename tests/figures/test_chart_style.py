"""The shared chart style: one base layout, NaN-free traces, the modebar config every chart carries."""

from __future__ import annotations

import json

from apps.figures.chart_style import CONFIG, FONT, chart, clean, layout


def test_layout_sets_the_house_style_and_lets_a_figure_override_it():
    base = layout("Title", margin={"l": 1}, barmode="stack")

    assert base["title"] == {"text": "Title", "x": 0, "font": {"size": 14}}
    assert base["font"] == FONT
    assert (base["margin"], base["barmode"]) == ({"l": 1}, "stack")


def test_clean_turns_nan_into_gaps_so_figures_are_valid_json():
    values = clean([0.5, float("nan"), None, 3])

    assert values == [0.5, None, None, 3]
    assert json.dumps(values, allow_nan=False) == "[0.5, null, null, 3]"


def test_chart_pairs_a_figure_with_the_shared_config():
    assert chart({"data": []}) == {"figure": {"data": []}, "config": CONFIG}
