"""bench/active_learning.py's output: the markdown tables, the primary figure and the rule
that reads it (BENCHMARKS.md, issues 24 and 39), and the JSON of every run.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from bench.active_learning_data import Data
from bench.active_learning_ratio import POOL_FIGURES, SEED_ROW, WHOLE_POOL_ROW
from bench.active_learning_rounds import REFERENCE


def show_estimate(figure: dict[str, Any]) -> str:
    if figure.get("status") != "ok":
        return "n/a"
    return (
        f"{figure['value']:.3f} [{figure['low']:.3f}, {figure['high']:.3f}] "
        f"(sd {figure['seed_sd']:.3f})"
    )


def show_ratio(ratio: dict[str, Any] | None) -> str:
    if not ratio:
        return ""
    if ratio.get("status") != "ok":
        return "n/a"
    if "cap" not in ratio:
        return "1 (reference)"
    floor, cap = ratio["floor"], ratio["cap"]
    value = {
        "beyond": f"> {cap:.2f} (beyond the largest budget)",
        "below": f"< {floor:.2f} (below the seed set)",
    }.get(ratio["reach"], f"{ratio['value']:.2f}")
    low = f"<= {floor:.2f}" if ratio["low"] <= floor else f"{ratio['low']:.2f}"
    high = f">= {cap:.2f}" if ratio["high"] >= cap else f"{ratio['high']:.2f}"
    seeds = ratio["per_seed"]
    return f"{value} [{low}, {high}] (seeds {min(seeds):.2f}-{max(seeds):.2f})"


PRIMARY_BUDGETS = (200, 400)
"""Where issue 24's primary figure reads the ratios, fixed before any run (BENCHMARKS.md)."""
PRIMARY_FIGURES = ("f1", "auroc")
BON32_PRIMARY_BUDGETS = (32, 48)
BON32_PRIMARY_SAMPLES = 32
BON32_CHOICE_FIGURES = ("f1", "auroc", "pool_f1", "pool_auroc")
"""Issue 39's, fixed before any run (BENCHMARKS.md): the ratios at 32 and 48 labels with 32
samples per problem; the choice reads ProcessBench's and the held-out pool's figures."""


def primary_figure(
    rows: list[dict[str, Any]],
    budgets: Sequence[int] = PRIMARY_BUDGETS,
    figures_read: Sequence[str] = PRIMARY_FIGURES,
) -> list[dict[str, Any]]:
    """Per strategy other than uniform, its ratios (uniform's labels per label) for F1 and
    step AUROC at each primary budget, and their geometric mean (None where a ratio is
    missing), highest first: the number the rule written before the runs reads."""
    references = {SEED_ROW, REFERENCE, WHOLE_POOL_ROW}
    strategies = dict.fromkeys(r["strategy"] for r in rows if r["strategy"] not in references)
    figures = []
    for strategy in strategies:
        at = {r["labels"]: r for r in rows if r["strategy"] == strategy}
        ratios = {
            f"{figure}@{budget}": at[budget]["ratio"].get(figure)
            for budget in budgets
            if budget in at
            for figure in figures_read
        }
        values = [r["value"] for r in ratios.values() if r and r["status"] == "ok"]
        whole = len(values) == len(budgets) * len(figures_read)
        mean = math.exp(sum(map(math.log, values)) / len(values)) if whole else None
        figures.append({"strategy": strategy, "ratios": ratios, "geometric_mean": mean})
    # None (a ratio missing) sorts last: every ratio is above 0.
    return sorted(figures, key=lambda f: f["geometric_mean"] or 0.0, reverse=True)


def rule_pick(primary: list[dict[str, Any]], retrained_only: bool = False) -> str:
    """The rule of BENCHMARKS.md, on ``primary_figure``'s list (highest first): the strategy
    with the highest geometric mean, provided it is above 1; otherwise uniform. With
    ``retrained_only`` (issue 39's product rule: the worker retrains its selector every run)
    the fixed selector's arms are left out."""
    if retrained_only:
        primary = [f for f in primary if not str(f["strategy"]).endswith(", fixed")]
    best = primary[0] if primary else None
    if best and (best["geometric_mean"] or 0.0) > 1:
        return str(best["strategy"])
    return REFERENCE


def print_table(result: dict[str, Any], out: TextIO = sys.stdout) -> None:
    setup = result["setup"]
    print(
        f"{setup['corpus']}, judged on the {setup['judged_on']} problems; the PRM: "
        f"{setup['device']}",
        file=out,
    )
    print(file=out)
    print(
        "| strategy | labels | ProcessBench F1 [95% CI] (sd over seeds) "
        "| step AUROC [95% CI] (sd) | uniform's labels per label, F1 [95% CI] (seeds) "
        "| same, AUROC | negatives per label |",
        file=out,
    )
    print("|---|---|---|---|---|---|---|", file=out)
    for row in result["rows"]:
        print(
            f"| {row.get('arm', row['strategy'])} | {row['labels']} | {show_estimate(row['f1'])} "
            f"| {show_estimate(row['auroc'])} | {show_ratio(row['ratio'].get('f1'))} "
            f"| {show_ratio(row['ratio'].get('auroc'))} | {row['negatives_per_label']:.2f} |",
            file=out,
        )
    print(file=out)
    if any(POOL_FIGURES.keys() & row.keys() for row in result["rows"]):
        print_pool_table(result["rows"], out)
    print_primary(
        result["primary"], setup["judged_on"] == "calibration", out, result.get("budgets_read")
    )
    print("| strategy | rounds | select + train + score, s (all seeds) | per round, s |", file=out)
    print("|---|---|---|---|", file=out)
    for name, compute in result["compute"].items():
        print(
            f"| {name} | {compute['rounds']} | {compute['seconds']:.1f} "
            f"| {compute['seconds'] / max(1, compute['rounds']):.2f} |",
            file=out,
        )


def print_pool_table(rows: list[dict[str, Any]], out: TextIO) -> None:
    """bon32's second judge: the held-out pool problems, by the simulated labeler."""
    print(
        "| strategy | labels | held-out pool F1 [95% CI] (sd) | held-out pool step AUROC "
        "[95% CI] (sd) | uniform's labels per label, pool F1 | same, pool AUROC |",
        file=out,
    )
    print("|---|---|---|---|---|---|", file=out)
    for row in rows:
        print(
            f"| {row.get('arm', row['strategy'])} | {row['labels']} "
            f"| {show_estimate(row['pool_f1'])} | {show_estimate(row['pool_auroc'])} "
            f"| {show_ratio(row['ratio'].get('pool_f1'))} "
            f"| {show_ratio(row['ratio'].get('pool_auroc'))} |",
            file=out,
        )
    print(file=out)


def print_primary(
    primary: list[dict[str, Any]], choosing: bool, out: TextIO, columns: list[str] | None = None
) -> None:
    """The primary figure's table, where the run has its budgets, and, on calibration
    problems (``choosing``), the rule's pick; a run judged on test problems confirms and
    never chooses."""
    if not any(f["geometric_mean"] is not None for f in primary):
        return
    columns = columns or [f"{f}@{b}" for b in PRIMARY_BUDGETS for f in PRIMARY_FIGURES]
    print(f"| strategy | {' | '.join(columns)} | geometric mean |", file=out)
    print("|---" * (len(columns) + 2) + "|", file=out)
    for figure in primary:
        cells = [_primary_cell(figure["ratios"].get(c)) for c in columns]
        mean = figure["geometric_mean"]
        shown = "n/a" if mean is None else f"{mean:.3f}"
        print(f"| {figure['strategy']} | {' | '.join(cells)} | {shown} |", file=out)
    if choosing:
        print(f"\nThe rule picks: {rule_pick(primary)}", file=out)
    print(file=out)


def _primary_cell(ratio: dict[str, Any] | None) -> str:
    if not ratio or ratio["status"] != "ok":
        return "n/a"
    bound = {"beyond": ">= ", "below": "<= "}.get(ratio["reach"], "")
    return f"{bound}{ratio['value']:.2f}"


def to_json(result: dict[str, Any], data: Data) -> dict[str, Any]:
    """The figures and, per run, its labeled solutions (ProcessBench ids) and snapshots."""
    return {
        **{k: v for k, v in result.items() if k != "runs"},
        "runs": [
            {
                "seed": run.seed,
                "strategy": run.strategy,
                "selector": run.selector,
                "rescorings": run.rescorings,
                "rounds": run.rounds,
                "seconds": round(run.seconds, 2),
                "labeled": [data.pool[i].id for i in run.labeled],
                "snapshots": [
                    {"labels": s.labels, "negatives": s.negatives, "threshold": s.threshold}
                    for s in run.snapshots.values()
                ],
            }
            for runs in result["runs"].values()
            for run in runs
        ],
    }
