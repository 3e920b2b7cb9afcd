"""The one certified type: its invariants, its spelling of "no certificate", derived intervals."""

from __future__ import annotations

import math

import pytest

from affine_homotopy.core.interval import Interval


def test_a_certified_interval_orders_its_ends_and_reports_its_gap() -> None:
    interval = Interval(0.8, 1.0, stop="tol", within_tol=True, solver="lawson", iterations=7)
    assert interval.certified and float(interval) == 1.0 == interval.value
    assert interval.gap == pytest.approx(0.2) and interval.relative_gap == pytest.approx(0.2)
    assert Interval(0.0, 0.0).relative_gap == 0.0
    with pytest.raises(ValueError, match="lower <= upper"):
        Interval(1.1, 1.0)


def test_no_certificate_is_spelled_nan() -> None:
    interval = Interval.uncertified(0.5, stop="local")
    assert not interval.certified and math.isnan(interval.lower) and math.isnan(interval.relative_gap)
    assert interval.contains(0.2) and not interval.contains(0.6)


def test_overlap_and_containment_use_the_slack() -> None:
    a, b = Interval(0.1, 0.2), Interval(0.25, 0.3)
    assert not a.overlaps(b) and a.overlaps(b, slack=0.025) and b.overlaps(a, slack=0.025)
    assert a.contains(0.21, slack=0.01) and not a.contains(0.22, slack=0.01)


def test_scaling_by_a_power_of_two_is_exact() -> None:
    interval = Interval(0.3, 0.7)
    assert interval.scaled(4.0) == Interval(1.2, 2.8)
    assert interval.scaled(0.25).scaled(4.0) == interval


def test_a_ratio_brackets_every_ratio_of_points_inside() -> None:
    numerator, denominator = Interval(0.5, 0.6), Interval(2.0, 2.5)
    ratio = numerator.ratio(denominator)
    for x in (0.5, 0.55, 0.6):
        for y in (2.0, 2.2, 2.5):
            assert ratio.contains(x / y)
    assert ratio.lower == 0.5 / 2.5 and ratio.upper == 0.6 / 2.0
    assert not numerator.ratio(Interval(0.0, 1.0)).certified
    assert not Interval.uncertified(0.6).ratio(denominator).certified
