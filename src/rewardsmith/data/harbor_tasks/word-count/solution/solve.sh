#!/bin/bash
# The reference solution: what an agent that solved the task leaves in /app.
cat > /app/wc.py <<'PY'
import sys

print(len(sys.stdin.read().split()))
PY
