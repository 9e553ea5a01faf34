#!/usr/bin/env python3
"""The main figures of `cosched report`, drawn from its CSV files with pandas and matplotlib.

    python3 examples/analysis.py results/pair-20261128-070000/

Reads jobs.csv, policies.csv and timeline.csv from the results directory (written by `cosched
compare`, `cosched run` or `cosched report`, a daemon's history with `report --since` included) and
writes, beside them:

  analysis-makespan-vs-slowdown.png  makespan against mean slowdown, one dot per run
  analysis-slowdown.png              each job's slowdown under each run
  analysis-response.png              each job's response time, instead of the above where no job
                                     has a slowdown (a daemon's jobs whose time alone is unknown)
  analysis-running-jobs.png          running jobs over time, one line per run

A figure whose numbers the directory lacks is skipped, saying so on standard error. Every numeric
column names its unit (`makespan_s`, `slowdown_ratio`, ...), so nothing here needs to know more
than the column names. Needs pandas and matplotlib (Debian: python3-pandas, python3-matplotlib);
draws without a display.
"""

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402


def makespan_vs_slowdown(runs: pd.DataFrame, out: Path) -> Path | None:
    # A run with unfinished jobs has no makespan; one whose jobs have no time alone, no slowdown.
    runs = runs.dropna(subset=["makespan_s", "mean_slowdown_ratio"])
    if runs.empty:
        skip("makespan-vs-slowdown", "no run has both a makespan and a mean slowdown")
        return None
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.scatter(runs["makespan_s"], runs["mean_slowdown_ratio"])
    for _, run in runs.iterrows():
        ax.annotate(run["run"], (run["makespan_s"], run["mean_slowdown_ratio"]),
                    textcoords="offset points", xytext=(4, 4))
    ax.set_xlabel("makespan (s)")
    ax.set_ylabel("mean slowdown")
    ax.set_title("Makespan against mean slowdown")
    return save(fig, out / "analysis-makespan-vs-slowdown.png")


def per_job(jobs: pd.DataFrame, out: Path) -> Path | None:
    """Each job's slowdown; its response time where no job has a slowdown."""
    if jobs["slowdown_ratio"].notna().any():
        column, name, label, title = ("slowdown_ratio", "slowdown",
                                      "slowdown (time shared / alone)", "Slowdown of each job")
    elif jobs["response_s"].notna().any():
        column, name, label, title = ("response_s", "response", "response time (s)",
                                      "Response time of each job (no time alone known)")
    else:
        skip("slowdown", "no job has a slowdown or a response time (none finished)")
        return None
    # Job ids tell apart the jobs of a daemon, whose names may repeat.
    jobs = jobs.assign(label=jobs["job"].astype(str) + " #" + jobs["job_id"].astype(str))
    table = jobs.pivot_table(index="label", columns="run", values=column, sort=False)
    fig, ax = plt.subplots(figsize=(7, 4))
    table.plot.bar(ax=ax, rot=0)
    if column == "slowdown_ratio":
        ax.axhline(1.0, linestyle="--", color="black", linewidth=0.8)
    ax.set_xlabel("job")
    ax.set_ylabel(label)
    ax.set_title(title)
    return save(fig, out / f"analysis-{name}.png")


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


def skip(figure: str, why: str) -> None:
    print(f"analysis-{figure}.png skipped: {why}", file=sys.stderr)


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
    for path in (makespan_vs_slowdown(runs, out), per_job(jobs, out),
                 running_jobs(timeline, out)):
        if path is not None:
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
