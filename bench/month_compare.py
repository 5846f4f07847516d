"""Compare month runs of `bench/google_month.py --json` user by user, against a reference run.

For each other run: the users' mean wait (the SDRF paper's Fig. 4 figure) and its change
against the reference in percent (negative: users wait less); the share of users whose own
mean wait is lower and higher than under the reference; and the share of users who complete
more and fewer tasks by the month's end (the paper's Fig. 5: a user's tasks ended by the end
of the month over its submitted ones). Users are those of the reference; the runs must be the
same workload (same days, capacity ratio and tasks), or the comparison is refused.

    .venv/bin/python bench/google_month.py --policy drf --json > /tmp/month-drf.json
    .venv/bin/python bench/google_month.py --policy sdrf --json > /tmp/month-sdrf.json
    .venv/bin/python bench/month_compare.py /tmp/month-drf.json /tmp/month-sdrf.json [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

#: What must be equal for two runs to be the same workload.
WORKLOAD_KEYS = ("days", "capacity_ratio", "tasks")


def load(path: Path) -> dict[str, Any]:
    try:
        row = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        sys.exit(f"month_compare.py: {path}: not a google_month.py --json output ({error})")
    missing = [key for key in (*WORKLOAD_KEYS, "policy", "users_mean_wait", "mean_wait_by_user",
                               "done_by_month_end_by_user") if key not in row]
    if missing:
        sys.exit(f"month_compare.py: {path}: missing {', '.join(missing)} (run google_month.py "
                 f"--json from this checkout)")
    return row


def share(count: int, users: int) -> float:
    return round(100 * count / users, 1)


def compare(reference: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """`other` against `reference`, user by user."""
    users = sorted(reference["mean_wait_by_user"])
    waits_lower = sum(other["mean_wait_by_user"][user] < reference["mean_wait_by_user"][user]
                      for user in users)
    waits_higher = sum(other["mean_wait_by_user"][user] > reference["mean_wait_by_user"][user]
                       for user in users)

    def done_ratio(run: dict[str, Any], user: str) -> float:
        ended, submitted = run["done_by_month_end_by_user"][user]
        return ended / submitted

    complete_more = sum(done_ratio(other, user) > done_ratio(reference, user) for user in users)
    complete_fewer = sum(done_ratio(other, user) < done_ratio(reference, user) for user in users)
    return {
        "policy": other["policy"],
        "delta": other.get("delta"),
        "users_mean_wait": round(other["users_mean_wait"], 1),
        "change_percent": round(100 * (other["users_mean_wait"] / reference["users_mean_wait"]
                                       - 1), 2),
        "users": len(users),
        "users_waiting_less_percent": share(waits_lower, len(users)),
        "users_waiting_more_percent": share(waits_higher, len(users)),
        "users_completing_more_percent": share(complete_more, len(users)),
        "users_completing_fewer_percent": share(complete_fewer, len(users)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reference", type=Path, help="the reference run's JSON (e.g. DRF)")
    parser.add_argument("others", type=Path, nargs="+", help="the runs compared with it")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    reference = load(args.reference)
    rows = []
    for path in args.others:
        other = load(path)
        differing = [key for key in WORKLOAD_KEYS if other[key] != reference[key]]
        if differing or sorted(other["mean_wait_by_user"]) != sorted(
                reference["mean_wait_by_user"]):
            parser.error(f"{path} is not the workload of {args.reference}: "
                         f"{', '.join(differing) or 'users'} differ")
        rows.append(compare(reference, other))
    if args.json:
        print(json.dumps({"reference": {"policy": reference["policy"],
                                        "users_mean_wait": round(reference["users_mean_wait"],
                                                                 1)},
                          "runs": rows}))
        return
    print(f"reference {reference['policy']}: users' mean wait "
          f"{reference['users_mean_wait']:.1f} s ({reference['tasks']:,} tasks, "
          f"{reference['days']:g} days, r={reference['capacity_ratio']:g})")
    for row in rows:
        print(f"{row['policy']:5} users' mean wait {row['users_mean_wait']:.1f} s "
              f"({row['change_percent']:+.2f} %); of {row['users']} users: "
              f"{row['users_waiting_less_percent']} % wait less, "
              f"{row['users_waiting_more_percent']} % wait more, "
              f"{row['users_completing_more_percent']} % complete more by the month's end, "
              f"{row['users_completing_fewer_percent']} % fewer")


if __name__ == "__main__":
    main()
