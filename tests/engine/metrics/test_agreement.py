"""Judge calibration against human labels: a hand computation and hypothesis properties."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tb_engine.metrics.agreement import MIN_LABELS, Confusion, calibration, confusion


def _pairs(tp: int, fp: int, fn: int, tn: int) -> list[tuple[bool, bool]]:
    return [(True, True)] * tp + [(True, False)] * fp + [(False, True)] * fn + [(False, False)] * tn


def test_calibration_equals_a_hand_computation():
    # 60 labels: judge yes 25 (20 of them humans say yes), human yes 30.
    # po = 45/60 = 0.75; pe = 25/60 * 30/60 + 35/60 * 30/60 = 0.5; kappa = (0.75 - 0.5) / 0.5 = 0.5
    result = calibration(_pairs(20, 5, 10, 25))

    assert result.confusion == Confusion(tp=20, fp=5, fn=10, tn=25)
    assert (result.n, result.confusion.agreements) == (60, 45)
    assert result.confusion.agreement == 0.75
    assert result.confusion.tpr == 20 / 30
    assert result.confusion.tnr == 25 / 30
    assert abs(result.kappa - 0.5) < 1e-12
    assert result.enough is True
    assert result.kappa_lo < 0.5 < result.kappa_hi
    assert (round(result.kappa_lo, 3), round(result.kappa_hi, 3)) == (
        round(calibration(_pairs(20, 5, 10, 25)).kappa_lo, 3),
        round(calibration(_pairs(20, 5, 10, 25)).kappa_hi, 3),
    )  # fixed seed: the same interval every time


def test_second_hand_computation_with_negative_kappa():
    # tp=1 fp=4 fn=4 tn=1: po = 0.2; judge yes 0.5, human yes 0.5 -> pe = 0.5; kappa = -0.6
    result = calibration(_pairs(1, 4, 4, 1))
    assert abs(result.kappa - (-0.6)) < 1e-12
    assert (result.confusion.tpr, result.confusion.tnr) == (0.2, 0.2)
    assert result.enough is False and MIN_LABELS == 30


def test_undefined_cases():
    assert calibration([]).kappa is None and calibration([]).kappa_lo is None
    one_class = calibration(_pairs(5, 0, 0, 0))  # both raters always "yes": chance agreement is 1
    assert one_class.kappa is None
    assert one_class.confusion.tpr == 1.0 and one_class.confusion.tnr is None
    assert Confusion().agreement is None


@st.composite
def label_pairs(draw):
    return draw(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=80))


@settings(max_examples=150, deadline=None)
@given(label_pairs())
def test_kappa_matches_its_definition_and_is_symmetric(pairs):
    table = confusion(pairs)
    n = len(pairs)
    po = sum(j == h for j, h in pairs) / n
    judge_yes = sum(j for j, _ in pairs) / n
    human_yes = sum(h for _, h in pairs) / n
    pe = judge_yes * human_yes + (1 - judge_yes) * (1 - human_yes)
    swapped = confusion([(h, j) for j, h in pairs])
    if pe == 1:
        assert table.kappa is None and swapped.kappa is None
        return
    expected = (po - pe) / (1 - pe)
    assert abs(table.kappa - expected) < 1e-9
    assert abs(swapped.kappa - table.kappa) < 1e-9  # kappa does not care which rater is which
    assert table.kappa <= 1 + 1e-12
    assert (abs(table.kappa - 1) < 1e-12) == (po == 1)


@settings(max_examples=50, deadline=None)
@given(label_pairs(), st.randoms(use_true_random=False))
def test_interval_is_ordered_and_ignores_label_order_of_counts(pairs, rnd):
    result = calibration(pairs, replicates=300)
    shuffled = list(pairs)
    rnd.shuffle(shuffled)
    assert calibration(shuffled, replicates=300).confusion == result.confusion
    if result.kappa_lo is not None:
        assert -1 - 1e-9 <= result.kappa_lo <= result.kappa_hi <= 1 + 1e-9


def test_judge_identity_versions_kind_model_and_prompt():
    from tb_engine.judges import judge_identity
    from tb_engine.llm_judge import JUDGE_INSTRUCTIONS

    keyword = judge_identity({"kind": "keyword"})
    assert judge_identity({}) == keyword and keyword.label == "keyword"
    llm = judge_identity({"kind": "llm", "base_url": "http://127.0.0.1:1/v1", "model": "m1"})
    assert (llm.model, llm.prompt) == ("m1", JUDGE_INSTRUCTIONS)  # the default prompt is part of it
    assert llm.key == judge_identity({"kind": "llm", "model": "m1", "temperature": 0}).key
    assert llm.key != judge_identity({"kind": "llm", "model": "m2"}).key
    assert llm.key != judge_identity({"kind": "llm", "model": "m1", "instructions": "Answer yes or no."}).key
    assert judge_identity({"kind": "llm", "endpoint": {"model": "m1"}}).key == llm.key
    assert len(llm.key) == 64 and llm.label.startswith("llm m1 · prompt ")
    assert judge_identity({"kind": "imported", "source": "run.jsonl"}).model == "run.jsonl"
