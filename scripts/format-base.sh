#!/bin/sh
# Print the commit that make format-check compares the working tree with.
# On a branch: its merge base with main (origin/main, else main), so every
# line the branch changed is checked.  On main itself, or a clone of it as CI
# makes: the previous commit, so the last commit's lines are checked.  A
# shallow clone is deepened by one commit when it has no parent to compare
# with.  Prints nothing when there is no such commit.
head=$(git rev-parse -q --verify HEAD 2>/dev/null) || exit 0
for ref in origin/main main; do
	mb=$(git merge-base HEAD "$ref" 2>/dev/null) || continue
	if [ "$mb" != "$head" ]; then
		echo "$mb"
		exit 0
	fi
	break
done
if ! git rev-parse -q --verify 'HEAD^' >/dev/null 2>&1 &&
	[ "$(git rev-parse --is-shallow-repository 2>/dev/null)" = true ]; then
	git fetch -q --deepen=1 >/dev/null 2>&1 || true
fi
git rev-parse -q --verify 'HEAD^' 2>/dev/null || true
