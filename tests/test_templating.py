"""The number filters pages use."""

from app.templating import counted, decimal, filesize, number, path_parts, percent


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


def test_decimals_group_thousands_as_counts_do() -> None:
    # Throughput wrote one rate three ways (1122.7, 1100.2, 1,100.2): one way now.
    assert (decimal(1122.66, 1), decimal(1100.2, 1), number(1100)) == (
        "1,122.7",
        "1,100.2",
        "1,100",
    )


def test_a_path_wraps_between_its_parts() -> None:
    assert str(path_parts("demo/number_theory/70288.json")) == (
        '<span class="part">demo/</span><wbr><span class="part">number_</span><wbr>'
        '<span class="part">theory/</span><wbr><span class="part">70288.json</span>'
    )
    assert str(path_parts("a<b")) == '<span class="part">a&lt;b</span>'
    assert str(path_parts(None)) == "—"
