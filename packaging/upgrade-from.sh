#!/bin/sh
# Prints the git revision of release N-1 for TestUpgradeFromPrevious, or
# nothing when this clone cannot name one (the test then fails under CI):
#   1. the newest release tag (v*) before HEAD;
#   2. else the commit in packaging/previous-release, when this clone has
#      it and it is an ancestor of HEAD (a pointer left ahead of HEAD, or
#      naming HEAD itself, would upgrade from the tree under test);
#   3. else the previous commit (HEAD~1).
set -u
cd "$(dirname "$0")/.." || exit 0
if tag=$(git describe --tags --abbrev=0 --match 'v[0-9]*' HEAD~1 2>/dev/null); then
	echo "$tag"
	exit 0
fi
prev=$(grep -v '^#' packaging/previous-release 2>/dev/null | grep -m1 -E '^[0-9a-f]{40}$')
if [ -n "$prev" ] && git merge-base --is-ancestor "$prev" HEAD 2>/dev/null &&
	[ "$(git rev-parse HEAD)" != "$prev" ]; then
	echo "$prev"
	exit 0
fi
git rev-parse -q --verify HEAD~1 2>/dev/null
exit 0
