"""The number filters pages use."""

from app.templating import counted, decimal, number, percent


def test_counted_makes_the_noun_agree_with_the_number() -> None:
    assert counted(1, "label") == "1 label"
    assert counted(0, "shared step") == "0 shared steps"
    assert counted(2000, "label pair") == "2,000 label pairs"
    assert counted(3, "analysis", "analyses") == "3 analyses"


def test_missing_figures_show_as_a_dash() -> None:
    assert (number(None), decimal(None), percent(None)) == ("—", "—", "—")
    assert (number(1234567), decimal(-0.27549), percent(0.4)) == ("1,234,567", "-0.275", "40.0%")
