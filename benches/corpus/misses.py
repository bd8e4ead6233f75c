#!/usr/bin/env python3
"""Lists a tool's misses and false positives from target/recall.json (benches/recall.rs).

Usage: misses.py [target/recall.json] [gateway|detect_secrets|gitleaks]
Prints misses per family and per context (positives no finding covered), then the false
positives (negatives whose file had a finding), by case id and context.
"""

import collections
import json
import sys

path = sys.argv[1] if len(sys.argv) > 1 else "target/recall.json"
tool = sys.argv[2] if len(sys.argv) > 2 else "gateway"
doc = json.load(open(path))
rows = doc["results"]
pos = [r for r in rows if r["label"] == "positive"]
neg = [r for r in rows if r["label"] == "negative"]
miss = [r for r in pos if r[tool] is False]
fp = [r for r in neg if r[tool] is True]
print("seed %s: %s misses %d of %d positives, %d false positives on %d negatives" % (doc["seed"], tool, len(miss), len(pos), len(fp), len(neg)))
for key in ("family", "context"):
    total = collections.Counter(r[key] for r in pos)
    missed = collections.Counter(r[key] for r in miss)
    print("\nmisses by %s (missed/total):" % key)
    for k, n in sorted(missed.items(), key=lambda kv: (-kv[1], kv[0])):
        print("  %-45s %4d/%d" % (k, n, total[k]))
print("\nfalse positives (case id: contexts):")
by_case = collections.defaultdict(list)
for r in fp:
    by_case[r["id"]].append(r["context"])
for k in sorted(by_case):
    print("  %s: %s" % (k, ", ".join(sorted(by_case[k]))))
