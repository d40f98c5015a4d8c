"""Markdown tables for docs/results.md from `evaluate --json` documents.

    python scripts/ladder_tables.py AFTER.json              # ladder, per-task tables, losses, E-codes
    python scripts/ladder_tables.py AFTER.json BEFORE.json  # plus the ladder before -> after

Plain JSON in, Markdown out: no Django, nothing stored.
"""

from __future__ import annotations

import json
import sys

SHORT = {
    "must_include_recall": "recall",
    "precision": "precision",
    "leakage": "leakage",
    "harmful_admission": "harmful",
    "redundancy": "redundancy",
    "tokens": "tokens",
}


def fmt(metric: str, value: float) -> str:
    return f"{value:.1f}" if metric == "tokens" else f"{value:.3f}"


def table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] + ["---:"] * (len(head) - 1)) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def ladder(doc: dict) -> str:
    metrics = doc["metrics"]
    rows = [
        [c, *(fmt(m, doc["conditions"][c]["mean"][m]) for m in metrics)] for c in doc["condition_order"]
    ]
    return table(["condition", *(SHORT[m] for m in metrics)], rows)


def before_after(after: dict, before: dict) -> str:
    metrics = ("must_include_recall", "precision", "tokens")
    head = ["condition"] + [f"{SHORT[m]} {side}" for m in metrics for side in ("before", "after")]
    rows = []
    for c in after["condition_order"]:
        row = [c]
        for m in metrics:
            row += [
                fmt(m, before["conditions"][c]["mean"][m]),
                fmt(m, after["conditions"][c]["mean"][m]),
            ]
        rows.append(row)
    return table(head, rows)


def per_task(doc: dict, metric: str) -> str:
    names = doc["condition_order"]
    rows = [
        [t, *(fmt(metric, doc["conditions"][c]["tasks"][t][metric]) for c in names)]
        for t in doc["task_info"]
    ]
    return table(["task", *names], rows)


def pairs(doc: dict) -> str:
    names = doc["condition_order"]
    rows = [[p, *(f"{row[c]:.3f}" for c in names)] for p, row in doc["pairs"].items()]
    return table(["pair", *names], rows)


def losses(doc: dict) -> str:
    stages = list(next(iter(doc["stage_losses"].values()))["counts"])
    rows = []
    for c in doc["condition_order"]:
        entry = doc["stage_losses"][c]
        rows.append(
            [c, str(entry["must"]), *(f"{entry['shares'][s]:.3f} ({entry['counts'][s]})" for s in stages)]
        )
    return table(["condition", "MUST", *stages], rows)


def ecodes(doc: dict) -> str:
    codes = list(next(iter(doc["ecode_counts"].values())))
    rows = [[c, *(str(doc["ecode_counts"][c][k]) for k in codes)] for c in doc["condition_order"]]
    return table(["condition", *codes], rows)


def main(argv: list[str]) -> None:
    after = json.loads(open(argv[1]).read())
    print(f"### {after['corpus']}\n\n#### Ladder (means over tasks)\n\n{ladder(after)}\n")
    if len(argv) > 2:
        before = json.loads(open(argv[2]).read())
        print(f"#### Before -> after\n\n{before_after(after, before)}\n")
    for metric in ("must_include_recall", "precision", "tokens"):
        print(f"#### Per task: {metric}\n\n{per_task(after, metric)}\n")
    if after["pairs"]:
        print(f"#### Pairs\n\n{pairs(after)}\n")
    print(f"#### Recall at every stage (share of MUST units, count)\n\n{losses(after)}\n")
    print(f"#### E-codes\n\n{ecodes(after)}\n")


if __name__ == "__main__":
    main(sys.argv)
