#!/usr/bin/env python3
"""Turns eval/perplexity.py's JSON into the tables of docs/fidelity.md and one plot per context
length (perplexity against device bytes held per token of the document, a point per policy and
budget).

    python3 eval/report.py fidelity.json [more.json ...] --plots docs/fidelity   # prints the tables

Several JSON files (runs split across processes or machines) merge into one report; each row
keeps the device that ran it.
"""
from __future__ import annotations

import argparse
import collections
import json
import math
import pathlib


def grouped(rows: list) -> dict:
    """(length, policy, budget) -> the rows of every document."""
    groups = collections.defaultdict(list)
    for row in rows:
        groups[(row["length"], row["policy"], row["budget"])].append(row)
    return groups


def tables(report: dict) -> str:
    lines = []
    groups = grouped(report["rows"])
    for length in sorted({key[0] for key in groups}):
        keys = [key for key in groups if key[0] == length]
        full = groups.get((length, "FULL", None))
        full_ppl = math.exp(sum(r["nll"] for r in full) / len(full)) if full and "nll" in full[0] else None
        docs = ", ".join(sorted({r["document"] for k in keys for r in groups[k]}))
        lines += [f"### L = {length} ({docs}; the last {report['predict']} tokens scored)", "",
                  "| policy | budget | perplexity | vs FULL | bytes held | bytes / token | attention error per layer (relative to exact) |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
        order = lambda key: (key[1] != "FULL", key[2] or 0, key[1])
        for key in sorted(keys, key=order):
            rows = groups[key]
            if any("error" in row for row in rows):
                lines.append(f"| {key[1]} | {key[2] or '-'} | refused: {rows[0]['error']} | | | | |")
                continue
            ppl = math.exp(sum(r["nll"] for r in rows) / len(rows))
            held = sum(r["bytes_held"] for r in rows) / len(rows)
            errors = [sum(r["layer_error"][i] for r in rows) / len(rows) for i in range(len(rows[0]["layer_error"]))]
            ratio = f"{ppl / full_ppl:.3f}x" if full_ppl else "-"
            backend = " (CPU backend)" if all(r.get("device") == "CPU" for r in rows) else ""
            lines.append(f"| {key[1]}{backend} | {key[2] or '-'} | {ppl:.3f} | {ratio} | {held / 1e6:.2f} MB | "
                         f"{held / length:.0f} | {' '.join(f'{e:.3f}' for e in errors)} |")
        lines.append("")
    return "\n".join(lines)


def plots(report: dict, prefix: pathlib.Path) -> list[pathlib.Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    written = []
    groups = grouped(report["rows"])
    for length in sorted({key[0] for key in groups}):
        figure, axes = plt.subplots(figsize=(7, 4.5))
        by_policy = collections.defaultdict(list)
        for key, rows in groups.items():
            if key[0] == length and all("nll" in r for r in rows):
                held = sum(r["bytes_held"] for r in rows) / len(rows)
                ppl = math.exp(sum(r["nll"] for r in rows) / len(rows))
                by_policy[key[1]].append((held / 1e6, ppl))
        colors, markers = plt.cm.tab20.colors, "osD^vP<>Xph*"
        for index, (policy, points) in enumerate(sorted(by_policy.items())):
            points.sort()
            full = policy == "FULL"
            axes.plot([p[0] for p in points], [p[1] for p in points], color="black" if full else colors[index % 20],
                      marker="*" if full else markers[index % len(markers)], markersize=12 if full else 5, label=policy)
        axes.set_xscale("log")
        axes.set_yscale("log")
        axes.set_xlabel("device bytes held (MB, all layers)")
        axes.set_ylabel(f"perplexity of the last {report['predict']} tokens")
        axes.set_title(f"L = {length}: perplexity against memory ({report['device']})")
        axes.grid(True, alpha=0.3)
        axes.legend(fontsize=7, ncol=2)
        path = prefix.parent / f"{prefix.name}_{length}.png"
        figure.tight_layout()
        figure.savefig(path, dpi=110)
        plt.close(figure)
        written.append(path)
    return written


def merged(paths: list) -> dict:
    """One report of the files' rows, each row tagged with its file's device."""
    report = {"rows": []}
    for path in paths:
        part = json.loads(path.read_text())
        report.setdefault("predict", part["predict"])
        if part["predict"] != report["predict"]:
            raise SystemExit(f"{path}: {part['predict']} predicted tokens, the others {report['predict']}")
        report["rows"] += [dict(row, device=part["device"]) for row in part["rows"]]
    report["device"] = " + ".join(sorted({row["device"] for row in report["rows"]}))
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("json", type=pathlib.Path, nargs="+")
    parser.add_argument("--plots", type=pathlib.Path, help="write PREFIX_<length>.png")
    args = parser.parse_args()
    report = merged(args.json)
    print(tables(report))
    if args.plots:
        for path in plots(report, args.plots):
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
