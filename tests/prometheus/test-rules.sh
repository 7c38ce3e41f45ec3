#!/bin/bash
# SPDX-License-Identifier: MIT
# The shipped Prometheus rules (config/prometheus/slotd.rules.yml): valid, and each alert and
# recording rule behaving as slotd.rules.test.yml states, by Debian's promtool.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
command -v promtool >/dev/null || { echo "skipped: promtool not found (apt-get install prometheus)"; exit 77; }
promtool check rules "$here/../../config/prometheus/slotd.rules.yml"
promtool test rules "$here/slotd.rules.test.yml"
