"""The number filters pages use."""

from app.templating import counted, decimal, filesize, number, percent


def test_counted_makes_the_noun_agree_with_the_number() -> None:
    assert counted(1, "label") == "1 label"
    assert counted(0, "shared step") == "0 shared steps"
    assert counted(2000, "label pair") == "2,000 label pairs"
    assert counted(3, "analysis", "analyses") == "3 analyses"


def test_missing_figures_show_as_a_dash() -> None:
    assert (number(None), decimal(None), percent(None), filesize(None)) == ("—",) * 4
    assert (number(1234567), decimal(-0.27549), percent(0.4)) == ("1,234,567", "-0.275", "40.0%")


def test_filesize_in_binary_units_to_three_figures() -> None:
    sizes = [0, 1023, 1024, 1536, 10 * 2**20, 540_000_000, 3 * 2**40]
    assert [filesize(size) for size in sizes] == [
        "0 B",
        "1,023 B",
        "1.00 KiB",
        "1.50 KiB",
        "10.0 MiB",
        "515 MiB",
        "3.00 TiB",
    ]
