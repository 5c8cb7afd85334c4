"""A demo set of MATH-style problems and model solutions, generated from templates.

Nothing here is copied from MATH or any other dataset: every problem is drawn from a template
with random numbers, and every solution is worked out by code, step by step. Some solutions
carry a planted slip (a wrong sum or a dropped sign at one step) that propagates to a wrong
final answer, so a new user has real mistakes to find; :func:`demo_slips` says where each
slip shows and gives that step alternatives to rate (PRM800K's alternative completions): the
step without the slip, and with another slip. A few more solutions come with their answer
key (:func:`demo_gold_solutions`), to serve as quality-control questions.

The number in a problem's ``unique_id`` (``demo/algebra/4321.json``) is the seed its problem
was drawn from, so :func:`demo_solutions` can rebuild a problem from its record alone. The
numbers are stable only for one version of this module's list of families.
"""

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from random import Random
from typing import Any, Literal

GENERATOR = "steplabel-demo"
MAX_SOLUTIONS_PER_PROBLEM = 8
SUBJECT_SLUGS = {
    "Algebra": "algebra",
    "Counting & Probability": "counting_and_probability",
    "Geometry": "geometry",
    "Intermediate Algebra": "intermediate_algebra",
    "Number Theory": "number_theory",
    "Prealgebra": "prealgebra",
}
_UNIQUE_ID = re.compile(r"demo/([a-z_]+)/(\d+)\.json")
_ATTEMPTS = 100

Kind = Literal["correct", "flawed", "wrong"]
"""Correct; correct with one irrelevant or false-but-unused step; or with a planted slip."""
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


def problem_number(unique_id: str) -> int:
    """The seed number in a demo ``unique_id``; ValueError for any other id."""
    match = _UNIQUE_ID.fullmatch(unique_id)
    if match is None:
        raise ValueError(f"not a demo unique_id: {unique_id!r}")
    return int(match.group(2))


def draw_problem(number: int) -> DemoProblem:
    """The problem behind a ``unique_id`` number: its family is the number modulo the count."""
    return FAMILIES[number % len(FAMILIES)](Random(number))


def _unique_id(number: int, problem: DemoProblem) -> str:
    return f"demo/{SUBJECT_SLUGS[problem.subject]}/{number}.json"


def _finish(steps: list[str], answer: Fraction) -> list[str]:
    """The steps with PRM800K's answer section closing the last one."""
    return [*steps[:-1], f"{steps[-1]}\n\n# Answer\n\n{tex(answer)}"]


def _record(number: int, problem: DemoProblem) -> dict[str, object]:
    steps, answer = problem.solve(Scratch())
    # The boxed answer takes the place of the model's closing restatement.
    solution = " ".join(steps[:-1]) + rf" The answer is $\boxed{{{tex(answer)}}}$."
    return {
        "problem": problem.text,
        "solution": solution,
        "answer": tex(answer),
        "subject": problem.subject,
        "level": problem.level,
        "unique_id": _unique_id(number, problem),
    }


def demo_problems(seed: int = 0, count: int = 24) -> list[dict[str, object]]:
    """``count`` demo problems in PRM800K's math_splits format, the same for the same seed."""
    if count < 0:
        raise ValueError(f"count must be at least 0, not {count}")
    rng = Random(seed)
    order = list(range(len(FAMILIES)))
    rng.shuffle(order)
    records: list[dict[str, object]] = []
    texts: set[str] = set()
    for i in range(count):
        family = order[i % len(order)]
        for _ in range(_ATTEMPTS):
            number = rng.randrange(1, 10_000) * len(FAMILIES) + family
            problem = draw_problem(number)
            if problem.text not in texts:
                break
        else:
            raise ValueError(f"cannot draw {count} distinct demo problems")
        texts.add(problem.text)
        records.append(_record(number, problem))
    return records


def _slip(rng: Random, computed: int) -> Slip:
    # Dropped signs are rarer than arithmetic slips, as they are in real model output.
    delta = 0 if rng.random() < 0.25 else rng.choice((-10, -2, -1, 1, 2, 10))
    return Slip(rng.randrange(computed), delta)


def _detour(rng: Random) -> str:
    """A step that is irrelevant, or false but never used, so the answer stays right."""
    n = rng.randint(6, 15)
    return rng.choice(
        (
            f"I notice that ${n}^2 = {n * n + rng.choice((-1, 1))}$, "
            "though I don't think I need that.",
            f"Note that ${2 * n}$ is a prime number, which might matter later.",
            "Hmm, maybe I should draw a picture first. Actually, I don't think it helps here.",
            "Let me try plugging in a few small numbers to get a feel for it. "
            "That doesn't lead anywhere, so I'll go back to the algebra.",
        )
    )


@dataclass(frozen=True)
class SlippedStep:
    """Where a planted slip shows, and other ways to write that step, as PRM800K's phase 2
    offers alternative completions at a step rated negative."""

    index: int
    """The first step that states a wrong value: what a careful labeler rates -1."""
    alternatives: dict[str, int]
    """Each alternative with the rating a careful labeler gives it: +1 for the step written
    without the slip, -1 for the same value slipped another way."""

    def line_alternatives(self) -> list[list[str]]:
        """The alternatives as a solution line gives them: per step, none before the slip."""
        return [*([] for _ in range(self.index)), list(self.alternatives)]


@dataclass(frozen=True)
class Written:
    """A worked solution, its steps finished with the answer section, and where its planted
    slip shows, None without one."""

    steps: list[str]
    answer: Fraction
    slip: SlippedStep | None


_OTHER_DELTAS = (-10, -2, -1, 0, 1, 2, 10)


def _attempt(problem: DemoProblem, kind: Kind, rng: Random, computed: int) -> Written | None:
    """One solution of the given kind, or None where its slip divided by zero."""
    slip = _slip(rng, computed) if kind == "wrong" else None
    phrasing = rng.getstate()
    try:
        steps, answer = problem.solve(Scratch(rng, slip))
    except ZeroDivisionError:
        return None
    slipped = None if slip is None else _slipped_step(problem, phrasing, slip, steps, answer)
    if kind == "flawed":
        steps.insert(rng.randrange(1, len(steps)), _detour(rng))
    return Written(_finish(steps, answer), answer, slipped)


def _rephrased(problem: DemoProblem, phrasing: Any, slip: Slip | None) -> list[str] | None:
    """The finished steps drawn with the same phrasing and this slip instead (None where it
    divides by zero); the generator the phrasing came from stays where it was."""
    replay = Random()
    replay.setstate(phrasing)
    try:
        steps, answer = problem.solve(Scratch(replay, slip))
    except ZeroDivisionError:
        return None
    return _finish(steps, answer)


def _slipped_step(
    problem: DemoProblem, phrasing: Any, slip: Slip, steps: list[str], answer: Fraction
) -> SlippedStep | None:
    """Where ``slip`` shows in ``steps``, drawn with ``phrasing``; None where it changes
    nothing. The same phrasing without the slip reads the same up to that step, so the
    first step that reads differently is the first to state a wrong value."""
    slipped = _finish(steps, answer)
    right = _rephrased(problem, phrasing, None)
    assert right is not None, "a solution without a slip divides by zero"
    pairs = enumerate(zip(slipped, right, strict=True))
    index = next((i for i, (mine, theirs) in pairs if mine != theirs), None)
    if index is None:
        return None
    alternatives = {right[index]: 1}
    taken = {slipped[index], right[index]}
    # Seeded by the step, so that neither the other slip nor the order follows a pattern,
    # and the draw of the solutions after this one is left alone.
    order = Random(slipped[index])
    deltas = [delta for delta in _OTHER_DELTAS if delta != slip.delta]
    order.shuffle(deltas)
    for delta in deltas:
        other = _rephrased(problem, phrasing, Slip(slip.target, delta))
        # Slipped another way, the step must follow the same earlier steps and read anew.
        if other is None or other[:index] != slipped[:index] or other[index] in taken:
            continue
        alternatives[other[index]] = -1
        break
    rated = list(alternatives.items())
    order.shuffle(rated)
    return SlippedStep(index, dict(rated))


def _fresh_solution(
    problem: DemoProblem, kind: Kind, rng: Random, seen: set[tuple[str, ...]]
) -> Written:
    """A solution of the given kind whose steps are not among those already written."""
    scratch = Scratch()
    correct = problem.solve(scratch)[1]
    for _ in range(_ATTEMPTS):
        written = _attempt(problem, kind, rng, scratch.computed)
        # A slip can leave the answer right (abs of a positive value, a remainder that
        # absorbs it): such a draw, or a correct-kind one that came out wrong, is redrawn.
        if written is None or (written.answer != correct) != (kind == "wrong"):
            continue
        if tuple(written.steps) not in seen:
            return written
    raise RuntimeError(f"cannot write another distinct {kind} solution for: {problem.text}")


_SCORE_MEANS: dict[Kind, float] = {"correct": 0.74, "flawed": 0.6, "wrong": 0.36}


def _kinds(rng: Random, per_problem: int) -> list[Kind]:
    """About half wrong, the rest correct, one of them sometimes with a flawed step."""
    wrong = per_problem // 2 + (per_problem % 2 == 1 and rng.random() < 0.5)
    rest = per_problem - wrong
    flawed = 1 if rest >= 2 and rng.random() < 0.5 else 0
    counts: dict[Kind, int] = {"wrong": wrong, "flawed": flawed, "correct": rest - flawed}
    kinds = [kind for kind, n in counts.items() for _ in range(n)]
    rng.shuffle(kinds)
    return kinds


def _score(kind: Kind, rng: Random) -> float:
    """A verifier-like score: higher for correct solutions, on average."""
    return round(min(1.0, max(0.0, rng.gauss(_SCORE_MEANS[kind], 0.16))), 3)


def _solution_line(uid: str, steps: list[str], answer: str, score: float) -> dict[str, object]:
    """A solution as ``steplabel import solutions`` reads it."""
    return {
        "unique_id": uid,
        "steps": steps,
        "answer": answer,
        "generator": GENERATOR,
        "score": score,
    }


def _drawn_problem(record: dict[str, object]) -> tuple[str, DemoProblem]:
    """The record's ``unique_id`` and the problem drawn from it, checked against its text."""
    uid = str(record["unique_id"])
    problem = draw_problem(problem_number(uid))
    if problem.text != record["problem"]:
        raise ValueError(f"{uid} is not the demo problem it names")
    return uid, problem


def _problem_solutions(
    record: dict[str, object], seed: int, per_problem: int
) -> list[tuple[Written, dict[str, object]]]:
    """The problem's solutions, each as written and as its line."""
    uid, problem = _drawn_problem(record)
    # Seeded per problem, so a problem's solutions do not depend on the rest of the list.
    rng = Random(f"{seed}:{uid}")
    solutions: list[tuple[Written, dict[str, object]]] = []
    seen: set[tuple[str, ...]] = set()
    for kind in _kinds(rng, per_problem):
        written = _fresh_solution(problem, kind, rng, seen)
        seen.add(tuple(written.steps))
        line = _solution_line(uid, written.steps, tex(written.answer), _score(kind, rng))
        solutions.append((written, line))
    return solutions


def _written_solutions(
    problems: list[dict[str, object]], seed: int, per_problem: int
) -> list[tuple[Written, dict[str, object]]]:
    if not 1 <= per_problem <= MAX_SOLUTIONS_PER_PROBLEM:
        raise ValueError(
            f"per_problem must be between 1 and {MAX_SOLUTIONS_PER_PROBLEM}, not {per_problem}"
        )
    return [pair for record in problems for pair in _problem_solutions(record, seed, per_problem)]


def demo_solutions(
    problems: list[dict[str, object]], seed: int = 0, per_problem: int = 4
) -> list[dict[str, object]]:
    """``per_problem`` model solutions for each demo problem, about half with a planted slip."""
    return [line for _, line in _written_solutions(problems, seed, per_problem)]


def demo_slips(
    problems: list[dict[str, object]], seed: int = 0, per_problem: int = 4
) -> dict[tuple[str, ...], SlippedStep | None]:
    """Where each :func:`demo_solutions` solution's planted slip shows (None without one),
    with alternatives for its step, keyed by its steps: what a careful labeler finds, for
    simulations and benchmarks, and what gives a solution line its ``alternatives``."""
    return {
        tuple(written.steps): written.slip
        for written, _ in _written_solutions(problems, seed, per_problem)
    }


GOLD_SEED = 2


@dataclass(frozen=True)
class GoldSolution:
    """A demo solution with its answer key, fit to be a quality-control question's gold label:
    every step rated +1 up to the planted slip, which is rated -1 (``found_error``), or every
    step +1 where there is no slip (``solution``)."""

    unique_id: str
    steps: list[str]
    answer: str
    score: float
    ratings: list[int]
    finish_reason: Literal["found_error", "solution"]

    def line(self) -> dict[str, object]:
        """The solution as :func:`demo_solutions` writes them."""
        return _solution_line(self.unique_id, self.steps, self.answer, self.score)


def demo_gold_solutions(
    problems: list[dict[str, object]],
    taken: Iterable[Mapping[str, Any]] = (),
    seed: int = GOLD_SEED,
) -> list[GoldSolution]:
    """One more solution of each problem, alternately with a slip and correct, with its
    answer key; none repeats the steps of a solution in ``taken`` (lines of the same shape)."""
    written_before: defaultdict[str, set[tuple[str, ...]]] = defaultdict(set)
    for line in taken:
        written_before[line["unique_id"]].add(tuple(line["steps"]))
    kinds: tuple[Kind, Kind] = ("wrong", "correct")
    return [
        _gold_solution(record, kinds[index % 2], seed, written_before)
        for index, record in enumerate(problems)
    ]


def _gold_solution(
    record: dict[str, object],
    kind: Kind,
    seed: int,
    written_before: dict[str, set[tuple[str, ...]]],
) -> GoldSolution:
    uid, problem = _drawn_problem(record)
    rng = Random(f"gold:{seed}:{uid}")
    written = _fresh_solution(problem, kind, rng, written_before[uid])
    answer, score = tex(written.answer), _score(kind, rng)
    if written.slip is None:
        ratings = [1] * len(written.steps)
        return GoldSolution(uid, written.steps, answer, score, ratings, "solution")
    ratings = [1] * written.slip.index + [-1]
    return GoldSolution(uid, written.steps, answer, score, ratings, "found_error")


PHASE1_SEED = 3


def demo_phase1_solutions(
    problems: list[dict[str, object]],
    taken: Iterable[Mapping[str, Any]] = (),
    seed: int = PHASE1_SEED,
) -> list[dict[str, object]]:
    """One phase-1 task for each problem: every step with candidates to rate and choose from.

    The candidates of a step are other draws of the same step. Every other task follows a
    solution with a planted slip: at its slip the only candidate is wrong, so the labeler
    writes the step, and after it the draws without the slip follow the labeler's path
    while the task's own steps follow the wrong one. None repeats a solution in ``taken``.
    """
    written_before: defaultdict[str, set[tuple[str, ...]]] = defaultdict(set)
    for line in taken:
        written_before[line["unique_id"]].add(tuple(line["steps"]))
    return [
        _phase1_task(record, index % 2 == 1, seed, written_before)
        for index, record in enumerate(problems)
    ]


def _phase1_task(
    record: dict[str, object],
    slipped: bool,
    seed: int,
    written_before: dict[str, set[tuple[str, ...]]],
) -> dict[str, object]:
    uid, problem = _drawn_problem(record)
    rng = Random(f"phase1:{seed}:{uid}")
    kind: Kind = "wrong" if slipped else "correct"
    own = _fresh_solution(problem, kind, rng, written_before[uid])
    # Candidates may repeat other tasks' steps: only the task's own steps must be new.
    seen = {tuple(own.steps)}
    right = _other_draws(problem, "correct", rng, seen, 2)
    wrong = own if slipped else _fresh_solution(problem, "wrong", rng, seen)
    slip = len(wrong.steps) if wrong.slip is None else wrong.slip.index
    alternatives = []
    for index, text in enumerate(own.steps):
        if slipped:
            # At the slip no draw is right; past it, the right draws follow a corrected path.
            drawn = [] if index == slip else [draft.steps[index] for draft in right]
        else:
            # The slipped draw is a wrong candidate at its slip, and off the path after it.
            drafts = [*right, *([wrong] if index <= slip else [])]
            drawn = [draft.steps[index] for draft in drafts]
        alternatives.append(list(dict.fromkeys(c for c in drawn if c != text)))
    line = _solution_line(uid, own.steps, tex(own.answer), _score(kind, rng))
    return {**line, "alternatives": alternatives, "style": "phase1"}


def _other_draws(
    problem: DemoProblem, kind: Kind, rng: Random, seen: set[tuple[str, ...]], count: int
) -> list[Written]:
    """Up to ``count`` more distinct solutions of the kind: fewer where the phrasings run out."""
    drafts: list[Written] = []
    for _ in range(count):
        try:
            draft = _fresh_solution(problem, kind, rng, seen)
        except RuntimeError:
            break
        seen.add(tuple(draft.steps))
        drafts.append(draft)
    return drafts
