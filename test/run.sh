#!/usr/bin/env bash
# `npm test`: the lanes of jest.config.js, shared (two files at a time) then alone (one at a time).
# Arguments go to both (a file path runs in the lane that holds it); the exit status is 1 if either failed.
set -u
cd "$(dirname "$0")/.."
status=0
TEST_LANE=shared npx jest --maxWorkers=2 --passWithNoTests "$@" || status=1
TEST_LANE=alone npx jest --runInBand --passWithNoTests "$@" || status=1
exit "$status"
