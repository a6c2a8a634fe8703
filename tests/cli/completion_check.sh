#!/usr/bin/env bash
# The shell completions: both scripts parse (bash -n, zsh -n when zsh is installed), and the bash
# one, sourced into a plain bash with the sqllock under test first on PATH, completes commands and
# options. Usage: completion_check.sh SQLLOCK_BINARY COMPLETIONS_DIR
set -uo pipefail
bin=$1 dir=$2
fail=0
problem() { echo "completion_check: $*" >&2; fail=1; }

bash -n "$dir/sqllock.bash" || problem "bash -n $dir/sqllock.bash failed"
if command -v zsh >/dev/null; then
  zsh -n "$dir/_sqllock" || problem "zsh -n $dir/_sqllock failed"
else
  problem "zsh is not installed (scripts/install-deps.sh installs it): cannot check $dir/_sqllock"
fi

PATH="$(dirname "$bin"):$PATH"
source "$dir/sqllock.bash" || problem "sourcing $dir/sqllock.bash failed"
[[ $(complete -p sqllock 2>/dev/null) == *"-F _sqllock"* ]] || problem "no completion registered for sqllock"

# complete WORDS... : COMPREPLY for the command line WORDS with the cursor at the end of the last.
complete_line() {
  COMP_WORDS=("$@")
  COMP_CWORD=$(($# - 1))
  COMP_LINE="$*"
  COMP_POINT=${#COMP_LINE}
  COMPREPLY=()
  _sqllock
  printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ' | sed 's/ $//'
}
expect() {  # expect "WANT" WORDS...
  local want=$1; shift
  local got
  got=$(complete_line "$@")
  [[ $got == "$want" ]] || problem "'$*<TAB>': want [$want], got [$got]"
}
expect_has() {  # expect_has WORD WORDS...: WORD is one of the completions, and all start with the prefix
  local want=$1; shift
  local got prefix=${*: -1}
  got=" $(complete_line "$@") "
  [[ $got == *" $want "* ]] || problem "'$*<TAB>': want $want among [$got]"
  for w in $got; do [[ $w == "$prefix"* ]] || problem "'$*<TAB>': $w does not start with $prefix"; done
}

expect "status" sqllock st
expect "--name --no-notifications --no-prepared-statements" sqllock run --n
expect "release" sqllock --url sqlite:x.db rel
expect "migrate" sqllock help mi
expect "--force" sqllock release --name job --f
expect_has --json sqllock status --
expect_has --url sqllock status --
expect_has --verbose sqllock -
expect_has echo sqllock run --name job ech       # CMD: a command name
expect "" sqllock run --name job echo --n        # CMD's own arguments are not ours

((fail)) && exit 1
echo "completion_check: bash completion answers as expected; scripts parse"
