#!/usr/bin/env bash
# The main job: build everything, then run the sample engine through the conformance kit and
# print the report. (Serving it behind the OpenAI frontend arrives with the runtime.)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
exec node packages/sample-engine/dist/cli.js conformance "$@"
