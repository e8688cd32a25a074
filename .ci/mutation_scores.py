"""Per-module mutation scores of the last ``mutmut run`` (``make mutation``; CONTRIBUTING.md).

Reads ``mutmut results --all true`` (one ``<module>.x_<function>__mutmut_<n>: <status>`` line per mutant) and
prints, per module, the killed mutants (a timeout counts as killed: the mutant broke the code) over the mutants
that were run (``not checked`` and ``skipped`` are left out; ``no tests`` counts as not killed: nothing would
notice that change). ``--survivors`` also lists the mutants that were not killed; ``mutmut show <name>`` prints
one's diff.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

KILLED = {"killed", "timeout"}
NOT_RUN = {"not checked", "skipped"}
#: ``trackeval.gate.decide.x__floor_check__mutmut_3`` or, for a method, ``...policy.xǁUnitPolicyǁkey__mutmut_1``
LINE = re.compile(r"^\s*(?P<name>(?P<module>[\w.]+?)\.x[_ǁ]\S*__mutmut_\d+): (?P<status>.+?)\s*$")


def main(argv: list[str]) -> int:
    mutmut = Path(sys.executable).with_name("mutmut")
    out = subprocess.run([str(mutmut), "results", "--all", "true"], capture_output=True, text=True, check=True)
    by_module: dict[str, Counter[str]] = defaultdict(Counter)
    survivors: list[tuple[str, str]] = []
    for line in out.stdout.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        status = m["status"]
        by_module[m["module"]][status] += 1
        if status not in KILLED | NOT_RUN:
            survivors.append((m["name"], status))
    if not by_module:
        print("no mutmut results (run `make mutation` first)", file=sys.stderr)
        return 1
    print(f"{'module':40} {'killed':>8} {'run':>6} {'score':>7}   not killed")
    for module in sorted(by_module):
        c = by_module[module]
        run = sum(n for s, n in c.items() if s not in NOT_RUN)
        killed = sum(c[s] for s in KILLED)
        rest = ", ".join(f"{n} {s}" for s, n in sorted(c.items()) if s not in KILLED | NOT_RUN) or "-"
        score = f"{100 * killed / run:6.1f}%" if run else "    n/a"
        pending = f" ({c['not checked']} not checked)" if c["not checked"] else ""
        print(f"{module:40} {killed:8d} {run:6d} {score}   {rest}{pending}")
    if "--survivors" in argv:
        for name, status in survivors:
            print(f"{status:12} {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
