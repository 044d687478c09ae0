#!/bin/bash
# Grades /app/wc.py on each case in /tests/cases: the reward is the share it counts right.
cd /app || exit 1
total=0
passed=0
for case in /tests/cases/*.txt; do
  total=$((total + 1))
  expected=$(cat "${case%.txt}.expected")
  timeout 5 python3 wc.py < "$case" > output.txt 2> /dev/null
  if [ "$(tr -d '[:space:]' < output.txt)" = "$expected" ]; then
    passed=$((passed + 1))
  fi
done
# Nothing the program started may outlive the grading or write after it: stop every other
# process of this user, then replace whatever the log folder holds with the verdict.
kill -9 -1 2> /dev/null
rm -f /logs/verifier/reward.txt /logs/verifier/reward.json
reward=$(awk -v p="$passed" -v t="$total" 'BEGIN { printf "%.4f", (t ? p / t : 0) }')
printf '{"reward": %s, "passed": %d, "total": %d}\n' "$reward" "$passed" "$total" \
  > /logs/verifier/reward.json
