#!/bin/bash
# check_exports.sh LIBRARY HEADER: the shared library exports exactly the
# functions its C header declares (the version script kvrt.map lists them).
set -euo pipefail
exported=$(nm -D --defined-only "$1" | awk '{print $3}' | sed 's/@.*//' | grep -v '^KVRT_' | sort -u)
declared=$(grep -o '\bkvrt_[a-z_]*(' "$2" | tr -d '(' | sort -u)
if [ "$exported" != "$declared" ]; then
  echo "exported and declared differ (< exported, > declared):"
  diff <(echo "$exported") <(echo "$declared") || true
  exit 1
fi
echo "$(echo "$exported" | wc -l) functions exported, as declared"
