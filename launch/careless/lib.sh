# lib.sh: the checks every careless-user case runs (sourced by
# launch/careless_user.sh; the case files call these). Each case runs under
# `timeout -k 2 ${CASE_TIMEOUT:-30}` and is checked automatically: exit
# status, exactly one error line with the words it must name, no source path /
# bad_alloc / assertion / Python traceback text, guarded files unchanged
# (sha256sum), guarded directories holding the same names (nothing
# half-written left behind) and outputs not created before a refusal.
# Needs BIN, T (the scratch directory, also the working directory) and
# SECTION (the surface, the table's first column).

ROWS=() OKS=0 BUGS=0 GUARDS=() SUMS="" ABSENT=() GUARD_DIRS=() DIR_LISTS=""

row() {
  ROWS+=("| $SECTION | $1 | $2 | $3 | $4 |")
  if [[ $4 == OK ]]; then OKS=$((OKS + 1)); else BUGS=$((BUGS + 1)); fi
}
guard() { GUARDS=("$@"); SUMS=$(sha256sum "$@" 2>&1); } # files that must not change
absent() { ABSENT=("$@"); }                             # paths a refusal must not create
dir_list() { for d in "$@"; do echo "$d:"; ls -A "$d" 2>&1; done; }
guard_dirs() { GUARD_DIRS=("$@"); DIR_LISTS=$(dir_list "$@"); } # directories whose names must not change
run_bin() {
  timeout -k 2 "${CASE_TIMEOUT:-30}" "$@" >"$T/.out" 2>"$T/.err" </dev/null
  RC=$?
}
# run_term_after SECONDS CMD...: runs CMD as run_bin does, in the
# background, sends it SIGTERM after SECONDS and waits; RC is its status.
run_term_after() {
  local seconds=$1 pid
  shift
  timeout -k 2 "${CASE_TIMEOUT:-30}" "$@" >"$T/.out" 2>"$T/.err" </dev/null &
  pid=$!
  sleep "$seconds"
  kill -TERM $pid
  wait $pid
  RC=$?
}
errline() { grep -a '^ddp_train: error' "$T/.err" | head -1 | tr '|' '/'; }
verdict() { if [[ -z $1 ]]; then echo OK; else echo "BUG: $1"; fi; }

# Checks common to every case; appends problems to $WHY.
common_checks() {
  if grep -qaE '\.(cpp|h|cu):[0-9]|bad_alloc|Assertion|terminate called|Segmentation|^Traceback' "$T/.out" "$T/.err"; then
    WHY+="internal text in output; "
  fi
  ((RC == 124 || RC == 137)) && WHY+="hung (timeout); "
  if ((${#GUARDS[@]})) && [[ $(sha256sum "${GUARDS[@]}" 2>&1) != "$SUMS" ]]; then
    WHY+="a guarded file changed or vanished; "
  fi
  if ((${#GUARD_DIRS[@]})) && [[ $(dir_list "${GUARD_DIRS[@]}") != "$DIR_LISTS" ]]; then
    WHY+="a guarded directory's files changed: $(diff <(echo "$DIR_LISTS") <(dir_list "${GUARD_DIRS[@]}") | grep '^[<>]' | tr '\n' ' ' | cut -c1-80); "
  fi
  for p in "${ABSENT[@]}"; do [[ -e $p || -L $p ]] && WHY+="$(basename "$p") was created; "; done
  GUARDS=() SUMS="" ABSENT=() GUARD_DIRS=() DIR_LISTS=""
}

# The words ('|'-separated) that must all be in LINE; appends misses to $WHY.
want_words() {
  local line=$1 words=$2 ws w
  IFS='|' read -ra ws <<<"$words"
  for w in "${ws[@]}"; do [[ $line == *"$w"* ]] || WHY+="no '$w'; "; done
}

# case_refused NAME EXPECT_WORDS -- CMD...: exit 1, one error line naming the words ('|'-separated).
case_refused() {
  local name=$1 words=$2
  shift 3
  run_bin "$@"
  WHY=""
  ((RC == 1)) || WHY+="exit $RC; "
  local n line
  n=$(grep -a '^ddp_train: error' "$T/.err" | sed 's/(rank [0-9]* on/(rank R on/' | sort -u | wc -l) # one per rank
  [[ $n == 1 ]] || WHY+="$n error lines; "
  line=$(errline)
  want_words "$line" "$words"
  grep -qaE 'step [0-9]+/' "$T/.out" && WHY+="trained first; "
  common_checks
  row "$name" "refused: ${words//|/, }" "exit $RC: $(cut -c1-170 <<<"${line:-$(tail -c 120 "$T/.err" | tr '\n|' ' /')}")" "$(verdict "$WHY")"
}

# case_runs NAME EXPECT_WORDS STATUS -- CMD...: exit STATUS, stdout+stderr hold the words.
case_runs() {
  local name=$1 words=$2 want=$3 ws w
  shift 4
  run_bin "$@"
  WHY=""
  ((RC == want)) || WHY+="exit $RC, not $want; "
  IFS='|' read -ra ws <<<"$words"
  for w in "${ws[@]}"; do grep -qaF -- "$w" "$T/.out" "$T/.err" || WHY+="no '$w'; "; done
  common_checks
  local what
  what=$(errline | cut -c1-170)
  [[ -z $what ]] && what=$(grep -avE '^(device|model|data|world|epoch)' "$T/.out" | tail -1 | cut -c1-110 | tr -d '\000' | tr '|' '/')
  row "$name" "exit $want: ${words//|/, }" "exit $RC: $what" "$(verdict "$WHY")"
}

# check NAME EXPECT OUTCOME WHY: a row from a shell test run by the caller.
check() { row "$1" "$2" "$3" "$(verdict "$4")"; }
ck() { printf '%s/ckpt-step%012d.safetensors' "$1" "$2"; }

# case_tool NAME EXPECT_WORDS STATUS -- CMD...: a Python tool refuses: exit
# STATUS, and stderr holds exactly one line besides argparse's usage block,
# naming the words.
case_tool() {
  local name=$1 words=$2 want=$3
  shift 4
  run_bin "$@"
  WHY=""
  ((RC == want)) || WHY+="exit $RC, not $want; "
  local lines n
  lines=$(grep -av -e '^usage: ' -e '^  ' "$T/.err" | grep -a .)
  n=$(grep -c . <<<"$lines")
  [[ $n == 1 ]] || WHY+="$n stderr lines; "
  want_words "$lines" "$words"
  common_checks
  row "$name" "exit $want: ${words//|/, }" "exit $RC: $(head -1 <<<"$lines" | cut -c1-170 | tr '|' '/')" "$(verdict "$WHY")"
}
