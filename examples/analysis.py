#!/usr/bin/env python3
"""The main figures of `cosched report`, drawn from its CSV files with pandas and matplotlib.

    python3 examples/analysis.py results/pair-20261128-070000/

Reads jobs.csv, policies.csv and timeline.csv from the results directory (written by `cosched
compare` or `cosched report`) and writes, beside them:

  analysis-makespan-vs-slowdown.png  makespan against mean slowdown, one dot per run
  analysis-slowdown.png              each job's slowdown under each run
  analysis-running-jobs.png          running jobs over time, one line per run

Every numeric column names its unit (`makespan_s`, `slowdown_ratio`, ...), so nothing here needs
to know more than the column names. Needs pandas and matplotlib (Debian: python3-pandas,
python3-matplotlib); draws without a display.
"""

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


def makespan_vs_slowdown(runs: pd.DataFrame, out: Path) -> Path:
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.scatter(runs["makespan_s"], runs["mean_slowdown_ratio"])
    for _, run in runs.iterrows():
        ax.annotate(run["run"], (run["makespan_s"], run["mean_slowdown_ratio"]),
                    textcoords="offset points", xytext=(4, 4))
    ax.set_xlabel("makespan (s)")
    ax.set_ylabel("mean slowdown")
    ax.set_title("Makespan against mean slowdown")
    return save(fig, out / "analysis-makespan-vs-slowdown.png")


def slowdown_per_job(jobs: pd.DataFrame, out: Path) -> Path:
    table = jobs.pivot_table(index="job", columns="run", values="slowdown_ratio", sort=False)
    fig, ax = plt.subplots(figsize=(7, 4))
    table.plot.bar(ax=ax, rot=0)
    ax.axhline(1.0, linestyle="--", color="black", linewidth=0.8)
    ax.set_ylabel("slowdown (time shared / alone)")
    ax.set_title("Slowdown of each job")
    return save(fig, out / "analysis-slowdown.png")


def running_jobs(timeline: pd.DataFrame, out: Path) -> Path:
    fig, ax = plt.subplots(figsize=(7, 3))
    for run, steps in timeline.groupby("run", sort=False):
        # Each job's latest state at every instant a state changed, then the started, unfinished ones.
        states = steps.pivot_table(index="time_s", columns="job_id", values="state",
                                   aggfunc="last").ffill()
        running = states.isin(["running", "frozen"]).sum(axis=1)
        ax.step(running.index, running.values, where="post", label=run)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("running jobs")
    ax.set_title("Running jobs over time")
    ax.legend()
    return save(fig, out / "analysis-running-jobs.png")


def save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    runs = pd.read_csv(out / "policies.csv")
    jobs = pd.read_csv(out / "jobs.csv")
    timeline = pd.read_csv(out / "timeline.csv")
    if runs.empty or jobs.empty or timeline.empty:
        print(f"{out}: no runs to draw", file=sys.stderr)
        return 1
    for path in (makespan_vs_slowdown(runs, out), slowdown_per_job(jobs, out),
                 running_jobs(timeline, out)):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
