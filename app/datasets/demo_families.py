"""The demo's problem families (app/datasets/demo.py): each draws a MATH-style problem from a
template with random numbers and works its solution out step by step, a planted slip
corrupting one computed value where asked.

The numbers in the demo's unique_id are stable only for one version of FAMILIES.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from random import Random

Worked = tuple[list[str], Fraction]
"""The steps of a worked solution and the final value they arrive at."""


@dataclass(frozen=True)
class Slip:
    """A planted mistake: the ``target``-th value a solution computes comes out wrong."""

    target: int
    delta: int
    """Added to the value's numerator; 0 means dropping the minus sign of a negative value."""

    def corrupt(self, value: Fraction) -> Fraction:
        if self.delta == 0:
            return abs(value)
        return Fraction(value.numerator + self.delta, value.denominator)


class Scratch:
    """Works a solution through, computing each value and wording each step."""

    def __init__(self, rng: Random | None = None, slip: Slip | None = None) -> None:
        self._rng = rng
        self._slip = slip
        self.computed = 0

    def calc(self, value: Fraction | int) -> Fraction:
        """A computed value; the slip, if it targets this one, corrupts it."""
        index = self.computed
        self.computed += 1
        if self._slip is not None and self._slip.target == index:
            return self._slip.corrupt(Fraction(value))
        return Fraction(value)

    def say(self, *phrasings: str) -> str:
        """One of several ways to put a step; the ground truth always takes the first."""
        return phrasings[0] if self._rng is None else self._rng.choice(phrasings)


@dataclass(frozen=True)
class DemoProblem:
    """One drawn problem: its text, the numbers it was drawn with, and how to solve it.

    ``solve`` works through the steps; the last step only restates the result.
    """

    family: str
    subject: str
    level: int
    text: str
    params: Mapping[str, int]
    solve: Callable[[Scratch], Worked]


def tex(value: Fraction | int) -> str:
    """An exact number as MATH writes answers: ``5``, ``-5``, ``\\frac{3}{4}``."""
    value = Fraction(value)
    if value.denominator == 1:
        return str(value.numerator)
    sign = "-" if value < 0 else ""
    return rf"{sign}\frac{{{abs(value.numerator)}}}{{{value.denominator}}}"


def _signed(value: Fraction | int) -> str:
    """A term after another: ``+ 7`` or ``- 7``."""
    return f"- {tex(-value)}" if value < 0 else f"+ {tex(value)}"


def _signed_term(coefficient: int, variable: str) -> str:
    """A term after another, a unit coefficient left out: ``- x``, ``+ 3x``."""
    size = "" if abs(coefficient) == 1 else str(abs(coefficient))
    return f"{'-' if coefficient < 0 else '+'} {size}{variable}"


def _factor(value: Fraction | int) -> str:
    """A factor in a product, negatives in parentheses."""
    return f"({tex(value)})" if value < 0 else tex(value)


def _quotient(num: Fraction | int, den: Fraction | int, value: Fraction) -> str:
    """``\\frac{num}{den} = value``, leaving out the value where it reads the same."""
    written = rf"\frac{{{tex(num)}}}{{{tex(den)}}}"
    shown = tex(value)
    return written if written == shown else f"{written} = {shown}"


def _nonzero(rng: Random, low: int, high: int) -> int:
    return rng.choice([v for v in range(low, high + 1) if v != 0])


def _linear_equation(rng: Random) -> DemoProblem:
    a = rng.randint(2, 9)
    x = _nonzero(rng, -9, 12)
    b = _nonzero(rng, -20, 20)
    c = a * x + b
    equation = f"{a}x {_signed(b)} = {c}"

    def solve(s: Scratch) -> Worked:
        rhs = s.calc(c - b)
        root = s.calc(rhs / a)
        move = f"Subtracting ${b}$ from" if b > 0 else f"Adding ${-b}$ to"
        return [
            s.say(
                "I want to get $x$ by itself on one side of the equation.",
                "To solve for $x$, I need to isolate it.",
                "This is a linear equation, so I'll undo each operation on $x$ in turn.",
            ),
            f"{move} both sides gives ${a}x = {c} {_signed(-b)} = {tex(rhs)}$.",
            f"Dividing both sides by ${a}$ gives $x = {_quotient(rhs, a, root)}$.",
            s.say(
                f"So $x = {tex(root)}$.",
                f"Therefore the solution is $x = {tex(root)}$.",
                f"That means $x = {tex(root)}$.",
            ),
        ], root

    text = rng.choice(
        (f"Solve for $x$: ${equation}$.", f"What value of $x$ satisfies ${equation}$?")
    )
    level = 1 if b > 0 and x > 0 else 2
    params = {"a": a, "b": b, "c": c}
    return DemoProblem("linear_equation", "Algebra", level, text, params, solve)


def _linear_system(rng: Random) -> DemoProblem:
    k = rng.randint(1, 4)
    x = _nonzero(rng, -8, 12)
    y = rng.choice([v for v in range(-8, 13) if v not in (0, x)])
    d = x - y
    total = x + k * y
    ky = "y" if k == 1 else f"{k}y"

    def solve(s: Scratch) -> Worked:
        scaled_y = s.calc(total - d)
        y_value = s.calc(scaled_y / (k + 1))
        x_value = s.calc(y_value + d)
        product = s.calc(x_value * y_value)
        return [
            s.say(
                f"From the second equation, $x = y {_signed(d)}$.",
                f"I can solve the second equation for $x$: $x = y {_signed(d)}$.",
            ),
            f"Substituting into the first equation gives $(y {_signed(d)}) + {ky} = {total}$, "
            f"so ${k + 1}y {_signed(d)} = {total}$.",
            f"Then ${k + 1}y = {total} {_signed(-d)} = {tex(scaled_y)}$, "
            f"so $y = {_quotient(scaled_y, k + 1, y_value)}$.",
            f"Then $x = {tex(y_value)} {_signed(d)} = {tex(x_value)}$.",
            rf"Therefore $xy = {_factor(x_value)} \cdot {_factor(y_value)} = {tex(product)}$.",
            s.say(
                f"So the answer is ${tex(product)}$.",
                f"The value of $xy$ is ${tex(product)}$.",
                f"So $xy = {tex(product)}$.",
            ),
        ], product

    text = f"If $x + {ky} = {total}$ and $x - y = {d}$, what is the value of $xy$?"
    params = {"k": k, "total": total, "difference": d}
    return DemoProblem("linear_system", "Algebra", 2 if k == 1 else 3, text, params, solve)


def _arithmetic_series(rng: Random) -> DemoProblem:
    first = rng.randint(1, 15)
    step = rng.randint(2, 9)
    terms = rng.randint(6, 25)
    last = first + (terms - 1) * step
    second = first + step

    def solve(s: Scratch) -> Worked:
        diff = s.calc(second - first)
        count = s.calc((last - first) / diff + 1)
        pair = s.calc(first + last)
        total = s.calc(count * pair / 2)
        return [
            f"The first term is ${first}$ and the common difference is "
            f"${second} - {first} = {tex(diff)}$.",
            s.say(
                rf"The number of terms is $\frac{{{last} - {first}}}{{{tex(diff)}}} + 1 "
                f"= {tex(count)}$.",
                rf"The last term is ${last}$, so there are $\frac{{{last} - {first}}}"
                f"{{{tex(diff)}}} + 1 = {tex(count)}$ terms.",
            ),
            f"The first and last terms add up to ${first} + {last} = {tex(pair)}$.",
            s.say(
                "The sum is the number of terms times the average of the first and last: "
                rf"$\frac{{{tex(count)} \cdot {tex(pair)}}}{{2}} = {tex(total)}$.",
                "Pairing terms from both ends, the sum is "
                rf"$\frac{{{tex(count)} \cdot {tex(pair)}}}{{2}} = {tex(total)}$.",
            ),
            s.say(
                f"So the sum is ${tex(total)}$.",
                f"Therefore the series adds up to ${tex(total)}$.",
            ),
        ], total

    text = (
        "What is the sum of the arithmetic series "
        rf"${first} + {second} + {second + step} + \cdots + {last}$?"
    )
    params = {"first": first, "step": step, "terms": terms}
    level = 2 if terms <= 12 else 3
    return DemoProblem("arithmetic_series", "Algebra", level, text, params, solve)


def _quadratic_roots(rng: Random) -> DemoProblem:
    lead = rng.randint(1, 3)
    r = _nonzero(rng, -7, 9)
    t = rng.choice([v for v in range(-7, 10) if v not in (0, r, -r)])
    b = -lead * (r + t)
    c = lead * r * t
    ask_squares = rng.random() < 0.5
    polynomial = f"{'' if lead == 1 else lead}x^2 {_signed_term(b, 'x')} {_signed(c)}"

    def solve(s: Scratch) -> Worked:
        total = s.calc(Fraction(-b, lead))
        product = s.calc(Fraction(c, lead))
        steps = [
            s.say(
                r"By Vieta's formulas, $r + s = -\frac{b}{a}$ and $rs = \frac{c}{a}$.",
                "I don't need the roots themselves: Vieta's formulas give their sum "
                r"$-\frac{b}{a}$ and product $\frac{c}{a}$.",
            ),
            f"Here $a = {lead}$, $b = {b}$, and $c = {c}$, "
            f"so $r + s = {tex(total)}$ and $rs = {tex(product)}$.",
        ]
        if ask_squares:
            square = s.calc(total * total)
            twice = s.calc(2 * product)
            answer = s.calc(square - twice)
            steps += [
                "I can write $r^2 + s^2 = (r + s)^2 - 2rs$.",
                rf"Then $(r + s)^2 = ({tex(total)})^2 = {tex(square)}$ and "
                rf"$2rs = 2 \cdot {_factor(product)} = {tex(twice)}$.",
                f"So $r^2 + s^2 = {tex(square)} {_signed(-twice)} = {tex(answer)}$.",
            ]
        else:
            answer = s.calc(total / product)
            steps += [
                r"Combining the fractions, $\frac{1}{r} + \frac{1}{s} = "
                r"\frac{r + s}{rs}$.",
                rf"So $\frac{{1}}{{r}} + \frac{{1}}{{s}} = {_quotient(total, product, answer)}$.",
            ]
        steps.append(s.say(f"The answer is ${tex(answer)}$.", f"So the value is ${tex(answer)}$."))
        return steps, answer

    target = "$r^2 + s^2$" if ask_squares else r"$\frac{1}{r} + \frac{1}{s}$"
    text = f"Let $r$ and $s$ be the roots of ${polynomial} = 0$. Find {target}."
    params = {"lead": lead, "b": b, "c": c}
    level = 3 + (lead > 1) + (not ask_squares)
    return DemoProblem("quadratic_roots", "Intermediate Algebra", level, text, params, solve)


def _percent_discount(rng: Random) -> DemoProblem:
    item = rng.choice(("jacket", "lamp", "backpack", "bicycle", "board game", "pair of boots"))
    # Multiples of 20 dollars and 5 percent keep the true sale price a whole number.
    price = 20 * rng.randint(2, 15)
    percent = 5 * rng.randint(1, 12)
    coupon = rng.randint(2, 15)

    def solve(s: Scratch) -> Worked:
        off = s.calc(Fraction(price * percent, 100))
        sale = s.calc(price - off)
        final = s.calc(sale - coupon)
        return [
            s.say(
                "First I need the amount of the discount.",
                "I'll start by finding how much the sale takes off.",
                "Let me work out the discount first, then apply the coupon.",
            ),
            rf"${percent}\%$ of ${price}$ is $\frac{{{percent}}}{{100}} \cdot {price} "
            f"= {tex(off)}$.",
            f"So the sale price is ${price} - {_factor(off)} = {tex(sale)}$ dollars.",
            f"Subtracting the coupon gives ${tex(sale)} - {coupon} = {tex(final)}$ dollars.",
            s.say(
                f"So the {item} costs ${tex(final)}$ dollars.",
                rf"The final price is $\${tex(final)}$.",
            ),
        ], final

    text = (
        rf"A {item} normally costs $\${price}$. During a sale its price is reduced by "
        rf"${percent}\%$, and then a ${coupon}$-dollar coupon is applied to the sale price. "
        f"How many dollars does the {item} cost after the coupon?"
    )
    params = {"price": price, "percent": percent, "coupon": coupon}
    level = 1 if percent in (10, 25, 50) else 2
    return DemoProblem("percent_discount", "Prealgebra", level, text, params, solve)


_COUNT_WORDS = {3: "three", 4: "four", 5: "five", 6: "six", 7: "seven"}


def _missing_number(rng: Random) -> DemoProblem:
    count = rng.randint(4, 7)
    mean = rng.randint(40, 90)
    # Known numbers near the mean keep the missing one positive.
    known = [mean + rng.randint(-6, 6) for _ in range(count - 1)]

    def solve(s: Scratch) -> Worked:
        total = s.calc(count * mean)
        known_sum = s.calc(sum(known))
        missing = s.calc(total - known_sum)
        return [
            s.say(
                "The average is the sum divided by how many numbers there are.",
                "I'll use the fact that sum = average times count.",
            ),
            rf"So the {_COUNT_WORDS[count]} numbers add up to ${count} \cdot {mean} "
            f"= {tex(total)}$.",
            f"The known numbers add up to ${' + '.join(map(str, known))} = {tex(known_sum)}$.",
            s.say(
                f"So the remaining number is ${tex(total)} - {tex(known_sum)} = {tex(missing)}$.",
                f"The remaining number must make up the difference: "
                f"${tex(total)} - {tex(known_sum)} = {tex(missing)}$.",
            ),
        ], missing

    listed = ", ".join(f"${v}$" for v in known[:-1]) + f", and ${known[-1]}$"
    text = (
        f"The average of {_COUNT_WORDS[count]} numbers is ${mean}$. "
        f"{_COUNT_WORDS[count - 1].capitalize()} of them are {listed}. "
        "What is the remaining number?"
    )
    params = {"count": count, "mean": mean}
    return DemoProblem("missing_number", "Prealgebra", 1 if count <= 5 else 2, text, params, solve)


def _rectangle_area(rng: Random) -> DemoProblem:
    width = rng.randint(2, 25)
    extra = rng.randint(1, 12)
    perimeter = 2 * (2 * width + extra)

    def solve(s: Scratch) -> Worked:
        four_w = s.calc(perimeter - 2 * extra)
        w = s.calc(four_w / 4)
        length = s.calc(w + extra)
        area = s.calc(w * length)
        return [
            s.say(
                f"Let the width be $w$. Then the length is $w + {extra}$.",
                f"I'll call the width $w$, so the length is $w + {extra}$.",
            ),
            f"The perimeter is $2w + 2(w + {extra}) = 4w + {2 * extra}$, "
            f"so $4w + {2 * extra} = {perimeter}$.",
            f"Then $4w = {perimeter} - {2 * extra} = {tex(four_w)}$, "
            f"so $w = {_quotient(four_w, 4, w)}$.",
            f"The length is ${tex(w)} + {extra} = {tex(length)}$.",
            rf"The area is ${_factor(w)} \cdot {_factor(length)} = {tex(area)}$.",
            s.say(
                f"So the area of the rectangle is ${tex(area)}$.",
                f"Therefore the area is ${tex(area)}$ square units.",
            ),
        ], area

    text = (
        f"The length of a rectangle is ${extra}$ more than its width, and its perimeter "
        f"is ${perimeter}$. What is the area of the rectangle?"
    )
    params = {"extra": extra, "perimeter": perimeter}
    return DemoProblem("rectangle_area", "Geometry", 2 if width < 12 else 3, text, params, solve)


def _product_remainder(rng: Random) -> DemoProblem:
    m = rng.randint(5, 13)
    # Nonzero remainders, so that reducing each factor first is worth a step.
    a = m * rng.randint(12, 900) + rng.randint(1, m - 1)
    b = m * rng.randint(12, 900) + rng.randint(1, m - 1)

    def reduce(s: Scratch, n: int) -> tuple[Fraction, str]:
        rest = s.calc(n % m)
        return rest, (
            rf"Since ${n} = {m} \cdot {n // m} + {tex(rest)}$, "
            rf"we have ${n} \equiv {tex(rest)} \pmod{{{m}}}$."
        )

    def solve(s: Scratch) -> Worked:
        ra, reduce_a = reduce(s, a)
        rb, reduce_b = reduce(s, b)
        product = s.calc(ra * rb)
        remainder = s.calc(product % m)
        if 0 <= product < m:
            reason = rf"Since $0 \le {tex(product)} < {m}$"
        else:
            reason = (
                rf"Since ${tex(product)} = {m} \cdot {_factor(product // m)} + {tex(remainder)}$"
            )
        return [
            s.say(
                f"Instead of multiplying the large numbers, I can reduce each one modulo ${m}$.",
                f"Remainders multiply, so I'll work modulo ${m}$ from the start.",
            ),
            reduce_a,
            reduce_b,
            rf"So ${a} \cdot {b} \equiv {_factor(ra)} \cdot {_factor(rb)} = {tex(product)} "
            rf"\pmod{{{m}}}$.",
            f"{reason}, the remainder is ${tex(remainder)}$.",
            s.say(f"The answer is ${tex(remainder)}$.", f"So the remainder is ${tex(remainder)}$."),
        ], remainder

    text = rng.choice(
        (
            rf"What is the remainder when ${a} \cdot {b}$ is divided by ${m}$?",
            rf"Find the remainder when the product ${a} \times {b}$ is divided by ${m}$.",
        )
    )
    params = {"a": a, "b": b, "m": m}
    return DemoProblem(
        "product_remainder", "Number Theory", 2 if m <= 9 else 3, text, params, solve
    )


def _two_marbles(rng: Random) -> DemoProblem:
    colors = rng.sample(("red", "blue", "green", "yellow", "white"), 3)
    counts = [rng.randint(2, 9) for _ in colors]
    color, wanted = colors[0], counts[0]

    def solve(s: Scratch) -> Worked:
        total = s.calc(sum(counts))
        first = s.calc(wanted / total)
        left = s.calc(total - 1)
        second = s.calc((wanted - 1) / left)
        both = s.calc(first * second)
        return [
            f"There are ${' + '.join(map(str, counts))} = {tex(total)}$ marbles in all.",
            f"The probability that the first marble is {color} is "
            f"${_quotient(wanted, total, first)}$.",
            s.say(
                f"After one {color} marble is drawn, ${wanted - 1}$ {color} marbles remain "
                f"among ${tex(left)}$.",
                f"Once a {color} marble is gone, there are ${tex(left)}$ marbles left, "
                f"${wanted - 1}$ of them {color}.",
            ),
            f"So the probability that the second is also {color} is "
            f"${_quotient(wanted - 1, left, second)}$.",
            rf"Multiplying, the probability that both are {color} is "
            rf"${tex(first)} \cdot {tex(second)} = {tex(both)}$.",
            s.say(f"The answer is ${tex(both)}$.", f"So the probability is ${tex(both)}$."),
        ], both

    bag = ", ".join(f"${n}$ {c}" for n, c in zip(counts[:-1], colors[:-1], strict=True))
    text = (
        f"A bag contains {bag}, and ${counts[-1]}$ {colors[-1]} marbles. Two marbles are drawn "
        f"at random without replacement. What is the probability that both are {color}? "
        "Express your answer as a common fraction."
    )
    params = dict(zip(colors, counts, strict=True))
    level = 2 if sum(counts) <= 15 else 3
    return DemoProblem("two_marbles", "Counting & Probability", level, text, params, solve)


FAMILIES: tuple[Callable[[Random], DemoProblem], ...] = (
    _linear_equation,
    _linear_system,
    _arithmetic_series,
    _quadratic_roots,
    _percent_discount,
    _missing_number,
    _rectangle_area,
    _product_remainder,
    _two_marbles,
)
"""The problem families; the order is part of what a ``unique_id`` number means."""
