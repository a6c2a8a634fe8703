# bash completion for sqllock(1). Installed as share/bash-completion/completions/sqllock.
#
# The commands and options are read from `sqllock --help` and `sqllock COMMAND --help` of the
# sqllock being completed (cached per command for the shell's life), so a new option needs no
# edit here. Plain bash: it works without the bash-completion package and uses its
# _command_offset for CMD of `sqllock run` when that is loaded.

# Print the options of sqllock's COMMAND ($2; empty for the top level), one a line, followed by
# " 1" when the option takes a value, " 0" when it does not; and the commands as "cmd NAME".
_sqllock_describe() {
  "$1" ${2:+"$2"} --help 2>/dev/null | awk '
    /^[A-Za-z][A-Za-z ]*:$/ { section = $0; next }
    section == "Options:" && /^ +-/ {
      sub(/^ +/, ""); split($0, cols, /  +/)
      n = split(cols[1], parts, /[ ,]/)
      takes = (n > 1 && parts[n] !~ /^-/) ? 1 : 0
      for (i = 1; i <= n; i++) if (parts[i] ~ /^-/) print parts[i], takes
    }
    section == "Subcommands:" && /^  [a-z]/ { print "cmd", $1 }'
}

# The cached description of COMMAND ($2) of binary $1, in the variable _sqllock_desc.
_sqllock_cached() {
  local key="${1}|${2}"
  key=${key//[^A-Za-z0-9_]/_}
  local var="_sqllock_cache_$key"
  if [[ -z ${!var+set} ]]; then
    printf -v "$var" '%s' "$(_sqllock_describe "$1" "$2")"
  fi
  _sqllock_desc=${!var}
}

_sqllock() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
  local bin=${COMP_WORDS[0]} _sqllock_desc
  COMPREPLY=()

  _sqllock_cached "$bin" ""
  local top=$_sqllock_desc commands=() opt takes
  while read -r opt takes; do
    [[ $opt == cmd ]] && commands+=("$takes")
  done <<<"$top"

  # Find the command and, for run, the position of CMD; skip the values of options that take one.
  local i word cmd="" cmd_at=0 skip=0 desc=$top
  for ((i = 1; i < COMP_CWORD; i++)); do
    word=${COMP_WORDS[i]}
    if ((skip)); then skip=0; continue; fi
    if [[ $word == -- ]]; then
      [[ $cmd == run ]] && { cmd_at=$((i + 1)); break; }
      continue
    fi
    if [[ $word == -* ]]; then
      [[ $word == *=* ]] && continue
      while read -r opt takes; do
        [[ $opt == "$word" && $takes == 1 ]] && skip=1
      done <<<"$desc"
      continue
    fi
    if [[ -z $cmd ]]; then
      cmd=$word
      _sqllock_cached "$bin" "$cmd"
      desc=$_sqllock_desc
    elif [[ $cmd == run ]]; then
      cmd_at=$i
      break
    fi
  done

  # CMD ARGS of `sqllock run`: complete as a command line of its own.
  if ((cmd_at > 0)); then
    if declare -F _command_offset >/dev/null; then
      _command_offset "$cmd_at"
    elif ((cmd_at == COMP_CWORD)); then
      mapfile -t COMPREPLY < <(compgen -c -- "$cur")
    else
      mapfile -t COMPREPLY < <(compgen -f -- "$cur")
    fi
    return 0
  fi
  if [[ $cmd == run && $cur != -* && $skip == 0 && -n $cur ]]; then
    mapfile -t COMPREPLY < <(compgen -c -- "$cur")
    return 0
  fi

  # The value of an option.
  if ((skip)); then
    case $prev in
      --dir) mapfile -t COMPREPLY < <(compgen -d -- "$cur") ;;
      --url) mapfile -t COMPREPLY < <(compgen -W 'postgresql:// mysql:// sqlite: sqlite::memory:' -- "$cur") ;;
    esac
    return 0
  fi

  if [[ -z $cmd ]]; then
    if [[ $cur == -* ]]; then
      local opts=()
      while read -r opt takes; do [[ $opt == -* ]] && opts+=("$opt"); done <<<"$top"
      mapfile -t COMPREPLY < <(compgen -W "${opts[*]}" -- "$cur")
    else
      mapfile -t COMPREPLY < <(compgen -W "${commands[*]}" -- "$cur")
    fi
    return 0
  fi
  if [[ $cmd == help ]]; then
    mapfile -t COMPREPLY < <(compgen -W "${commands[*]}" -- "$cur")
    return 0
  fi
  if [[ $cur == -* ]]; then
    local opts=()
    while read -r opt takes; do [[ $opt == -* ]] && opts+=("$opt"); done <<<"$desc"
    mapfile -t COMPREPLY < <(compgen -W "${opts[*]}" -- "$cur")
  fi
  return 0
}
complete -F _sqllock sqllock
