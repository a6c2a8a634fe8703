#!/usr/bin/env bash
# The man page sqllock(1) renders without a groff warning, and documents what the command offers:
# every command `sqllock --help` lists (under COMMANDS), every flag `sqllock COMMAND --help` lists
# (under COMMON OPTIONS or OPTIONS OF COMMAND), every exit code the help names and the variables
# CMD gets. Usage: man_page_check.sh SQLLOCK_BINARY MAN_PAGE
set -uo pipefail
bin=$1 page=$2
fail=0
problem() { echo "man_page_check: $*" >&2; fail=1; }

# 1. Renders, with every groff warning enabled, as groff and as man(1) do; a warning fails.
warnings=$(groff -man -Tutf8 -ww -z "$page" 2>&1)
[[ -z $warnings ]] || problem "groff warns on $page:"$'\n'"$warnings"
if command -v man >/dev/null; then
  warnings=$(MANWIDTH=80 man --warnings=w -l "$page" 2>&1 >/dev/null)
  [[ -z $warnings ]] || problem "man -l warns on $page:"$'\n'"$warnings"
fi

# Plain text, one long line per paragraph (no hyphenation, no bold/underline), split by heading.
text=$(groff -man -Tutf8 -rLL=1000n -rHY=0 -P-cbou "$page" 2>/dev/null)
section_of() { awk -v want="$1" '/^[A-Z]/ { on = ($0 == want); next } on' <<<"$text"; }
common=$(section_of "COMMON OPTIONS")
[[ -n $common ]] || problem "no COMMON OPTIONS section"

# The options a --help lists: the first column of its Options: section.
flags_of() {
  "$bin" ${1:+"$1"} --help | awk '
    /^[A-Za-z][A-Za-z ]*:$/ { section = $0; next }
    section == "Options:" && /^ +-/ {
      sub(/^ +/, ""); split($0, cols, /  +/); n = split(cols[1], parts, /[ ,]/)
      for (i = 1; i <= n; i++) if (parts[i] ~ /^-/) print parts[i]
    }'
}
has_flag() { grep -qE -- "(^|[^-[:alnum:]])$1([^-[:alnum:]]|\$)" <<<"$2"; }

commands=$("$bin" --help | awk '/^[A-Za-z][A-Za-z ]*:$/ { s = $0; next } s == "Subcommands:" && /^  [a-z]/ { print $1 }')
[[ -n $commands ]] || problem "sqllock --help lists no commands"
command_section=$(section_of "COMMANDS")
checked=0
for flag in $(flags_of ""); do
  has_flag "$flag" "$common" || problem "flag $flag of 'sqllock --help' is not under COMMON OPTIONS"
  checked=$((checked + 1))
done
for cmd in $commands; do
  grep -qE "^ *$cmd( |\$)" <<<"$command_section" || problem "command '$cmd' is not under COMMANDS"
  own=$(section_of "OPTIONS OF ${cmd^^}")
  for flag in $(flags_of "$cmd"); do
    has_flag "$flag" "$common"$'\n'"$own" ||
      problem "flag $flag of 'sqllock $cmd --help' is neither under COMMON OPTIONS nor under OPTIONS OF ${cmd^^}"
    checked=$((checked + 1))
  done
done

# Exit codes the help names, and the environment.
exits=$(section_of "EXIT STATUS")
for code in $("$bin" --help | sed -n '/^Exit codes/,$p' | grep -oE '\b[0-9]{2,3}\b' | sort -u) 0 126 127; do
  grep -qE "^ *$code\$|^ *$code " <<<"$exits" || problem "exit code $code is not under EXIT STATUS"
done
environment=$(section_of "ENVIRONMENT")
for var in SQLLOCK_URL SQLLOCK_FENCE SQLLOCK_HOLDER; do
  has_flag "$var" "$environment" || problem "$var is not under ENVIRONMENT"
done

((fail)) && exit 1
echo "man_page_check: $page renders cleanly and documents $(wc -w <<<"$commands") commands and $checked flags"
