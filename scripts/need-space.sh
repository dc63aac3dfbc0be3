#!/usr/bin/env bash
# need-space.sh MB WHAT: stop at once, in one line, when the disk holding the checkout has less
# than MB megabytes free, instead of failing a minute later inside pip with "No space left on
# device" from several installs at once. Exit code 3 tells this apart from a failed install.
set -euo pipefail
need_mb=$1
what=$2
cd "$(dirname "$0")/.."
free_mb=$(df -Pm . | awk 'NR == 2 {print $4}')
if [ "$free_mb" -lt "$need_mb" ]; then
    echo "$what needs about $(( (need_mb + 1023) / 1024 )) GB free on the disk holding $PWD," \
        "and $free_mb MB is free: free some space there and run it again" >&2
    exit 3
fi
