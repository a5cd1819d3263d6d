#!/usr/bin/env bash
# labA: regenerate ground-truth tmux screens of Claude Code and OpenAI Codex CLI
# driven by a fake model server on loopback.  Non-interactive; see README-labA.md.
#
#   lab/run_lab_a.sh                 # everything (both CLIs, 200x50 and 100x30, timelines)
#   ONLY=codex lab/run_lab_a.sh      # one CLI
#   SIZES=200x50 TIMELINES=0 ...     # subsets
#   LABA_NPM_DIR=/some/dir ...       # reuse an existing `npm install --prefix` folder
#
# Outputs: $LAB_SCREENS/<cli>/<case>.{txt,ansi}, rows in $LAB_SCREENS/labels.tsv,
#          $LAB_SCREENS/<cli>/timeline-<n>/{frame-NNNN.txt,.ansi,frames.tsv,events.tsv}
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
OUT="${LAB_SCREENS:-$PWD/lab-screens}"
LABELS="$OUT/labels.tsv"
SERVER="$HERE/fake_model_server.py"
SCENARIO="$HERE/scenario_labA.json"

CLAUDE_VER="${CLAUDE_VER:-2.1.197}"
CODEX_VER="${CODEX_VER:-0.169.0}"
# --no-daemon exists from about 0.150 on; older releases refuse unknown flags
CODEX_FLAGS="${CODEX_FLAGS-"--no-daemon"}"
PORT_CLAUDE="${PORT_CLAUDE:-18101}"
PORT_CODEX="${PORT_CODEX:-18102}"
ONLY="${ONLY:-claude codex}"
SIZES="${SIZES:-200x50 100x30}"
TIMELINES="${TIMELINES:-1}"

W="$(mktemp -d -t labA.XXXXXX)"
echo "[labA] scratch: $W"
mkdir -p "$OUT"

# ------------------------------------------------------------------ bookkeeping
PIDS=()
SOCKS=()
cleanup() {
  for s in "${SOCKS[@]}"; do tmux -L "$s" kill-server 2>/dev/null; done
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
  # Codex may leave an app-server daemon behind (we run it with --no-daemon, but
  # be safe): kill only processes whose command line is inside our scratch dir.
  ps -eo pid=,args= | awk -v w="$W" 'index($0, w) {print $1}' | while read -r p; do
    [ "$p" != "$$" ] && kill "$p" 2>/dev/null
  done
  [ -n "${KEEP_SCRATCH:-}" ] || rm -rf "$W"
}
trap cleanup EXIT

log() { echo "[labA $(date -u +%H:%M:%S)] $*"; }

# labels.tsv: header once; our old rows removed (atomic rename) when re-running
( set -C; printf 'path\tcli\tstate\tsize\tnote\n' > "$LABELS" ) 2>/dev/null || true
python3 - "$LABELS" $ONLY <<'EOF'
import os, sys
path, clis = sys.argv[1], {"claude": "claude-code", "codex": "codex"}
mine = {clis[c] for c in sys.argv[2:] if c in clis}
lines = open(path).read().splitlines(True)
keep = [l for l in lines if l.split("\t")[1:2] == [] or l.split("\t")[1] not in mine]
if len(keep) != len(lines):
    tmp = path + ".labA.tmp"
    open(tmp, "w").writelines(keep)
    os.replace(tmp, path)
EOF

# ------------------------------------------------------------------ install
if [ -n "${LABA_NPM_DIR:-}" ]; then
  NPM="$LABA_NPM_DIR"
else
  NPM="$W/npm"; mkdir -p "$NPM"
  log "npm install @anthropic-ai/claude-code@$CLAUDE_VER @openai/codex@$CODEX_VER"
  npm install --prefix "$NPM" --no-audit --no-fund \
      "@anthropic-ai/claude-code@$CLAUDE_VER" "@openai/codex@$CODEX_VER" >"$W/npm.log" 2>&1 \
      || { cat "$W/npm.log"; exit 1; }
fi
BIN="$NPM/node_modules/.bin"
log "claude: $("$BIN/claude" --version 2>/dev/null)  codex: $(HOME="$W" CODEX_HOME="$W/.cx" "$BIN/codex" --version 2>/dev/null)"

cat > "$W/tmux.conf" <<'EOF'
set -g status off
set -g focus-events on
set -g history-limit 10000
set -g default-terminal "tmux-256color"
set -g escape-time 10
EOF

# ------------------------------------------------------------------ helpers
start_server() {  # name port
  local name="$1" port="$2"
  mkdir -p "$W/logs/$name"
  python3 "$SERVER" --port "$port" --logdir "$W/logs/$name" --scenario "$SCENARIO" \
      --workdir "$W/$name/proj" >"$W/logs/$name/server.out" 2>&1 &
  PIDS+=("$!")
  for _ in $(seq 50); do curl -sf "http://127.0.0.1:$port/_control/health" >/dev/null && return 0; sleep 0.1; done
  echo "server $name did not start" >&2; exit 1
}

make_proj() {  # dir
  mkdir -p "$1/build"
  printf '# Demo project\n\nA tiny project used by the labA screen lab.\n' > "$1/README.md"
  echo 'object' > "$1/build/out.o"
  (cd "$1" && git init -q . 2>/dev/null && git add -A && git -c user.email=lab@example.invalid -c user.name=lab commit -qm init 2>/dev/null) || true
}

tm() { tmux -L "$SOCK" -f "$W/tmux.conf" "$@"; }

open_session() {  # size envfile workdir
  local cols="${1%x*}" rows="${1#*x}"
  tm kill-server 2>/dev/null
  tm new-session -d -s lab -x "$cols" -y "$rows" "env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=$W TERM=tmux-256color LANG=C.UTF-8 bash --noprofile --norc"
  tm send-keys -t lab "source $2; cd $3; PS1='lab\$ '; clear" Enter
  sleep 0.8
}

pane() { tm capture-pane -p -t lab; }
wait_pane() {  # regex timeout
  local end=$((SECONDS + ${2:-30}))
  while [ $SECONDS -lt $end ]; do pane | grep -qE "$1" && return 0; sleep 0.3; done
  log "WARN: timeout waiting for screen /$1/"; return 1
}
wait_pane_gone() {  # regex timeout
  local end=$((SECONDS + ${2:-30}))
  while [ $SECONDS -lt $end ]; do pane | grep -qE "$1" || return 0; sleep 0.3; done
  log "WARN: timeout waiting for /$1/ to disappear"; return 1
}
EV_MAIN_END='"kind": "response_end".*"main": true.*"end_turn"'
EV_MAIN_START='"kind": "response_start".*"main": true'
EV_TOOL='"kind": "tool_call_sent"'
EV_ERR='"kind": "error_sent"'
EV_EDIT='"kind": "tool_call_sent".*("tool": "Edit"|apply_patch)'
ev_count() { local n; n=$(grep -cE "$1" "$EVENTS" 2>/dev/null); echo "${n:-0}"; }
wait_ev() {  # regex base timeout
  local end=$((SECONDS + ${3:-60}))
  while [ $SECONDS -lt $end ]; do [ "$(ev_count "$1")" -gt "$2" ] && return 0; sleep 0.2; done
  log "WARN: timeout waiting for event /$1/"; return 1
}
send_prompt() { tm send-keys -t lab -l "$1"; sleep 0.4; tm send-keys -t lab Enter; }

cap() {  # case state note
  local dir="$OUT/$CLI" name="$1-$SIZE"
  mkdir -p "$dir"
  tm capture-pane -p -t lab > "$dir/$name.txt"
  tm capture-pane -p -e -t lab > "$dir/$name.ansi"
  printf '%s\t%s\t%s\t%s\t%s\n' "$CLI/$name.txt" "$CLI" "$2" "$SIZE" "$3" >> "$LABELS"
  log "  captured $CLI/$name ($2)"
}

# label a transient error screen from what is on it: still retrying (busy
# marker present) -> BUSY, otherwise the error is final -> ERROR
cap_retry() {  # case note
  if pane | grep -qE "$BUSY_RE"; then cap "$1" BUSY "$2; CLI still retrying (busy marker on screen)"
  else cap "$1" ERROR "$2; no retry in progress, error is final"; fi
}

# ------------------------------------------------------------------ generic case list
# needs: CLI SIZE EVENTS APPROVE DENY IDLE_RE (regex of the idle screen) BUSY_RE
run_cases() {
  local b
  # READY: idle prompt right after start
  cap ready-startup READY "idle input prompt right after start-up"

  # BUSY: request sent, no token yet (spinner only)
  b=$(ev_count "$EV_MAIN_END"); local s; s=$(ev_count "$EV_MAIN_START")
  send_prompt "Think about it first HANGFIRST"
  wait_ev "$EV_MAIN_START" "$s" 20; sleep 4
  cap busy-waiting-first-token BUSY "request in flight, model silent (no token yet), spinner only"
  wait_ev "$EV_MAIN_END" "$b" 40; sleep 2.5
  cap ready-after-answer READY "turn finished, empty prompt, short answer above"

  # BUSY: streaming text
  b=$(ev_count "$EV_MAIN_END"); s=$(ev_count "$EV_MAIN_START")
  send_prompt "Please write a long paragraph SLOWTEXT"
  wait_ev "$EV_MAIN_START" "$s" 20; sleep 7
  cap busy-streaming BUSY "model streaming text (0.4 s per word)"
  wait_ev "$EV_MAIN_END" "$b" 60; sleep 2.5
  cap ready-after-long-answer READY "turn finished after a long streamed answer"

  # NEEDS_CONFIRMATION: shell command, approve
  b=$(ev_count "$EV_MAIN_END"); local t; t=$(ev_count "$EV_TOOL")
  send_prompt "Clean the build directory RUNBASH"
  wait_ev "$EV_TOOL" "$t" 30; sleep 2.5
  cap confirm-shell-command NEEDS_CONFIRMATION "approval prompt for shell command 'rm -rf build'"
  tm send-keys -t lab $APPROVE
  sleep 1.2
  cap busy-after-approve BUSY "just approved the command; tool ran, follow-up request streaming"
  wait_ev "$EV_MAIN_END" "$b" 60; sleep 2.5
  cap ready-after-tool READY "turn finished after an approved tool call"

  # BUSY: long running tool
  make_proj "$PROJ" >/dev/null 2>&1
  b=$(ev_count "$EV_MAIN_END"); t=$(ev_count "$EV_TOOL")
  send_prompt "Clean the build directory slowly SLEEPBASH"
  wait_ev "$EV_TOOL" "$t" 30; sleep 2.5
  cap confirm-shell-command-2 NEEDS_CONFIRMATION "approval prompt for 'sleep 8 && rm -rf build && echo cleaned'"
  tm send-keys -t lab $APPROVE
  sleep 3.5
  cap busy-tool-running BUSY "approved command is running (sleep 8)"
  wait_ev "$EV_MAIN_END" "$b" 60; sleep 2.5

  # NEEDS_CONFIRMATION: file creation, deny
  t=$(ev_count "$EV_TOOL")
  send_prompt "Create a notes file EDITFILE"
  wait_ev "$EV_TOOL" "$t" 30; sleep 2.5
  cap confirm-file-write NEEDS_CONFIRMATION "approval prompt for creating notes.txt (Claude: Write tool; Codex: apply_patch)"
  tm send-keys -t lab $DENY
  sleep 3
  cap ready-after-deny READY "user denied the file write with Esc; turn aborted, prompt idle"

  # NEEDS_CONFIRMATION: edit of an existing file, approve
  b=$(ev_count "$EV_MAIN_END"); t=$(ev_count "$EV_EDIT")
  send_prompt "Edit the readme PATCHFILE"
  wait_ev "$EV_EDIT" "$t" 30; sleep 2.5
  cap confirm-file-edit NEEDS_CONFIRMATION "approval prompt for editing README.md (diff shown)"
  tm send-keys -t lab $APPROVE
  wait_ev "$EV_MAIN_END" "$b" 60; sleep 2.5

  # ERROR: non-retryable 400
  local e; e=$(ev_count "$EV_ERR")
  send_prompt "Trigger an error FAIL400"
  wait_ev "$EV_ERR" "$e" 30; sleep 3
  cap error-400-invalid-request ERROR "HTTP 400 invalid_request_error shown"

  # ERROR: 500 / 529 (retried by the CLI first)
  e=$(ev_count "$EV_ERR")
  send_prompt "Trigger an overload FAIL529"
  wait_ev "$EV_ERR" "$e" 30; sleep 1.0
  cap_retry error-529-retrying "HTTP 529 overloaded, 1 s after the first error"
  sleep 2; wait_pane "$IDLE_RE" 90; sleep 2
  wait_pane_gone "$BUSY_RE" 90; sleep 1
  cap error-529-final ERROR "HTTP 529 overloaded; retries exhausted, error shown"

  e=$(ev_count "$EV_ERR")
  send_prompt "Trigger a server error FAIL500"
  wait_ev "$EV_ERR" "$e" 30; sleep 2
  wait_pane_gone "$BUSY_RE" 90; sleep 1.5
  cap error-500-final ERROR "HTTP 500 api_error after retries"

  e=$(ev_count "$EV_ERR")
  send_prompt "Trigger an auth error FAIL401"
  wait_ev "$EV_ERR" "$e" 30; sleep 3
  wait_pane_gone "$BUSY_RE" 60; sleep 1
  cap error-401-auth ERROR "HTTP 401 authentication_error shown"

  # 429 rate limit with retry-after: the CLI waits / retries
  e=$(ev_count "$EV_ERR")
  send_prompt "Trigger a rate limit FAIL429"
  wait_ev "$EV_ERR" "$e" 30; sleep 2.5
  cap_retry error-429-rate-limited "HTTP 429 rate_limit_error with retry-after: 5"
  wait_pane_gone "$BUSY_RE" 90; sleep 2
  cap error-429-final ERROR "HTTP 429 rate_limit_error shown after the CLI gave up retrying"

  # READY after the user interrupted a streaming answer with Esc
  s=$(ev_count "$EV_MAIN_START")
  send_prompt "Another long paragraph please SLOWTEXT"
  wait_ev "$EV_MAIN_START" "$s" 20; sleep 4
  tm send-keys -t lab Escape
  sleep 2.5
  cap ready-after-interrupt READY "user pressed Esc while the answer was streaming; turn aborted, prompt idle"

  # READY with a drafted but unsent prompt
  tm send-keys -t lab -l "this prompt is typed but not sent yet"
  sleep 1.5
  cap ready-draft-in-input READY "idle; user text typed in the input box but not submitted"
  tm send-keys -t lab C-u
  sleep 0.5
}

# ------------------------------------------------------------------ timelines
timeline() {  # n keyword approve_key description
  local n="$1" kw="$2" dir="$OUT/$CLI/timeline-$1"
  rm -rf "$dir"; mkdir -p "$dir"
  : > "$dir/.marks"
  touch "$dir/.run"
  ( i=0
    while [ -e "$dir/.run" ]; do
      i=$((i + 1)); f=$(printf 'frame-%04d' "$i"); t=$(date +%s.%N)
      tm capture-pane -p -t lab > "$dir/$f.txt"
      tm capture-pane -p -e -t lab > "$dir/$f.ansi"
      printf '%s\t%s\n' "$t" "$f.txt" >> "$dir/.frames"
      sleep 0.5
    done ) &
  local loop=$!
  PIDS+=("$loop")
  printf '%s\tREADY\tstart (idle)\n' "$(date +%s.%N)" >> "$dir/.marks"
  sleep 2
  local b t
  b=$(ev_count "$EV_MAIN_END"); t=$(ev_count "$EV_TOOL")
  printf '%s\tBUSY\tprompt submitted\n' "$(date +%s.%N)" >> "$dir/.marks"
  send_prompt "$4 $kw"
  wait_ev "$EV_TOOL" "$t" 60; sleep 3.5
  printf '%s\tBUSY\tapprove key %s sent\n' "$(date +%s.%N)" "$3" >> "$dir/.marks"
  tm send-keys -t lab $3
  wait_ev "$EV_MAIN_END" "$b" 90; sleep 4
  rm -f "$dir/.run"; wait "$loop" 2>/dev/null
  python3 - "$dir" "$EVENTS" "$b" <<'EOF'
import json, sys, os
d, events, base = sys.argv[1], sys.argv[2], int(sys.argv[3])
marks = []
for line in open(os.path.join(d, ".marks")):
    t, st, why = line.rstrip("\n").split("\t")
    marks.append((float(t), st, why))
t_start, t_prompt = marks[0][0], marks[1][0]
t_approve = marks[2][0]
ends = 0
for line in open(events):
    e = json.loads(line)
    if e["t"] < t_prompt:
        continue
    if e["kind"] == "tool_call_sent" and e["t"] < t_approve:
        marks.append((e["t"], "NEEDS_CONFIRMATION", "server sent tool call %s" % e.get("tool")))
    if e["kind"] == "response_start" and e.get("main"):
        marks.append((e["t"], "BUSY", "server response_start #%s" % e["no"]))
    if e["kind"] == "response_end" and e.get("main") and e.get("stop_reason") == "end_turn" and e["t"] > t_approve:
        marks.append((e["t"], "READY", "server final response_end #%s (end_turn)" % e["no"]))
marks.sort()
with open(os.path.join(d, "events.tsv"), "w") as f:
    f.write("t_seconds\tstate_from_here\tevent\n")
    for t, st, why in marks:
        f.write("%.3f\t%s\t%s\n" % (t - t_start, st, why))
rows = []
for line in open(os.path.join(d, ".frames")):
    t, fn = line.rstrip("\n").split("\t")
    t = float(t)
    st = [m for m in marks if m[0] <= t][-1][1]
    rows.append("%.2f\t%s\t%s\n" % (t - t_start, fn, st))
with open(os.path.join(d, "frames.tsv"), "w") as f:
    f.write("t_seconds\tfile\tstate\n")
    f.writelines(rows)
os.remove(os.path.join(d, ".marks")); os.remove(os.path.join(d, ".frames"))
EOF
  log "  timeline $CLI/timeline-$n: $(($(wc -l < "$dir/frames.tsv") - 1)) frames"
}

# ================================================================== Claude Code
run_claude() {
  CLI=claude-code; SOCK=labA-claude; SOCKS+=("$SOCK")
  local H="$W/claude/home"; PROJ="$W/claude/proj"
  mkdir -p "$H"; make_proj "$PROJ"
  start_server claude "$PORT_CLAUDE"; EVENTS="$W/logs/claude/events.jsonl"
  cat > "$W/claude/env.sh" <<EOF
export HOME=$H
export PATH=$BIN:\$PATH
export ANTHROPIC_BASE_URL=http://127.0.0.1:$PORT_CLAUDE
export ANTHROPIC_API_KEY=sk-ant-fake-lab-key-0000000000
export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
export DISABLE_TELEMETRY=1
export DISABLE_ERROR_REPORTING=1
export DISABLE_AUTOUPDATER=1
export CLAUDE_CODE_MAX_RETRIES=3
export TERM=tmux-256color
EOF
  APPROVE=Enter; DENY=Escape
  IDLE_RE='\? for shortcuts'; BUSY_RE='esc to interrupt'

  local first=1
  for SIZE in $SIZES; do
    log "Claude Code @ $SIZE"
    open_session "$SIZE" "$W/claude/env.sh" "$PROJ"
    if [ $first = 1 ]; then
      # 1) brand-new HOME: onboarding wants api.anthropic.com -> exits with an error
      tm send-keys -t lab "claude" Enter
      wait_pane 'Unable to connect|Failed to connect' 30; sleep 1
      cap error-startup-no-network ERROR "fresh HOME (no onboarding): CLI exits with 'Unable to connect to Anthropic services'; shell prompt below"
      # 2) onboarding done (theme etc. pre-seeded) but folder not trusted, key not approved
      python3 - "$H/.claude.json" <<'EOF'
import json, sys
p = sys.argv[1]
d = json.load(open(p))
d.update({"hasCompletedOnboarding": True, "lastOnboardingVersion": "2.1.197", "theme": "dark",
          "numStartups": 3, "autoUpdates": False})
json.dump(d, open(p, "w"), indent=2)
EOF
      tm send-keys -t lab "clear; claude" Enter
      wait_pane 'trust this folder|Yes, I trust' 30; sleep 1
      cap confirm-trust-folder NEEDS_CONFIRMATION "start-up dialog: trust this folder? (Enter = yes)"
      tm send-keys -t lab Enter
      wait_pane 'Detected a custom API key' 20; sleep 1
      cap confirm-custom-api-key NEEDS_CONFIRMATION "start-up dialog: use ANTHROPIC_API_KEY from env? (default is No; Up+Enter = Yes)"
      tm send-keys -t lab Up; sleep 0.3; tm send-keys -t lab Enter
      first=0
    else
      tm send-keys -t lab "clear; claude" Enter
    fi
    wait_pane "$IDLE_RE" 40; sleep 2.5
    run_cases
    if [ "$TIMELINES" = 1 ] && [ "$SIZE" = "${SIZES%% *}" ]; then
      make_proj "$PROJ" >/dev/null 2>&1
      tm send-keys -t lab -l "/clear"; sleep 0.5; tm send-keys -t lab Enter; sleep 2
      timeline 1 TIMELINEONE Enter "Clean up the build directory"
      timeline 2 TIMELINETWO Enter "Record a note"
    fi
    tm send-keys -t lab C-c; sleep 0.5; tm send-keys -t lab C-c; sleep 1
  done
  tm kill-server 2>/dev/null
  cp "$W/logs/claude/requests.jsonl" "$OUT/$CLI/server-requests.jsonl" 2>/dev/null
}

# ================================================================== Codex CLI
run_codex() {
  CLI=codex; SOCK=labA-codex; SOCKS+=("$SOCK")
  local H="$W/codex/home"; PROJ="$W/codex/proj"
  mkdir -p "$H/.codex"; make_proj "$PROJ"
  start_server codex "$PORT_CODEX"; EVENTS="$W/logs/codex/events.jsonl"
  cat > "$H/.codex/config.toml" <<EOF
model = "gpt-5-codex"
model_provider = "fake"
approval_policy = "on-request"
sandbox_mode = "read-only"
check_for_update_on_startup = false

[model_providers.fake]
name = "Fake lab model"
base_url = "http://127.0.0.1:$PORT_CODEX/v1"
env_key = "OPENAI_API_KEY"
wire_api = "responses"
request_max_retries = 2
stream_max_retries = 2
supports_websockets = false

[analytics]
enabled = false
EOF
  cat > "$W/codex/env.sh" <<EOF
export HOME=$H
export CODEX_HOME=$H/.codex
export PATH=$BIN:\$PATH
export OPENAI_API_KEY=sk-fake-lab-key
export TERM=tmux-256color
EOF
  APPROVE=y; DENY=Escape
  IDLE_RE='Ask Codex to do anything|for shortcuts'; BUSY_RE='esc to interrupt|Working|Reconnecting'

  local first=1
  for SIZE in $SIZES; do
    log "Codex @ $SIZE"
    open_session "$SIZE" "$W/codex/env.sh" "$PROJ"
    if [ $first = 1 ]; then
      # login screen: a second CODEX_HOME with the default OpenAI provider and no key
      mkdir -p "$W/codex/home-login/.codex"
      printf 'check_for_update_on_startup = false\n[analytics]\nenabled = false\n' > "$W/codex/home-login/.codex/config.toml"
      tm send-keys -t lab "clear; env -u OPENAI_API_KEY CODEX_HOME=$W/codex/home-login/.codex codex $CODEX_FLAGS" Enter
      wait_pane 'Sign in|sign in|API key|Trust' 30; sleep 2
      if pane | grep -q 'Trust this folder'; then tm send-keys -t lab Enter; sleep 3; fi
      cap login-screen NEEDS_CONFIRMATION "no credentials, default OpenAI provider: sign-in screen waiting for the user (not a tool approval)"
      tm send-keys -t lab C-c; sleep 1; tm send-keys -t lab C-c; sleep 1
      if [ -n "${CODEX_UPDATE_TO:-}" ]; then
        # The "Update available" menu without a network: Codex trusts its cached version.json
        # (checked less than a day ago) and shows the menu at start-up.
        mkdir -p "$W/codex/home-update/.codex"
        sed 's/^check_for_update_on_startup = false/check_for_update_on_startup = true/' \
          "$H/.codex/config.toml" > "$W/codex/home-update/.codex/config.toml"
        printf '{"latest_version":"%s","last_checked_at":"%s","dismissed_version":null}\n' \
          "$CODEX_UPDATE_TO" "$(date -u +%Y-%m-%dT%H:%M:%S.000000Z)" > "$W/codex/home-update/.codex/version.json"
        tm send-keys -t lab "clear; CODEX_HOME=$W/codex/home-update/.codex codex $CODEX_FLAGS" Enter
        if wait_pane 'Update available|update' 30; then
          sleep 1.5
          cap confirm-update-available NEEDS_CONFIRMATION "start-up menu 'Update available!' (update now / skip / skip until next version)"
        fi
        tm send-keys -t lab C-c; sleep 1; tm send-keys -t lab C-c; sleep 1
      fi
      tm send-keys -t lab "clear; codex $CODEX_FLAGS" Enter
      wait_pane 'Trust this folder|trust' 30; sleep 1
      cap confirm-trust-folder NEEDS_CONFIRMATION "start-up dialog: trust this folder? (Enter = trust)"
      tm send-keys -t lab Enter
      first=0
    else
      tm send-keys -t lab "clear; codex $CODEX_FLAGS" Enter
    fi
    wait_pane "$IDLE_RE" 40; sleep 2.5
    run_cases
    if [ "$TIMELINES" = 1 ] && [ "$SIZE" = "${SIZES%% *}" ]; then
      make_proj "$PROJ" >/dev/null 2>&1
      tm send-keys -t lab -l "/clear"; sleep 0.5; tm send-keys -t lab Enter; sleep 2
      timeline 1 TIMELINEONE y "Clean up the build directory"
      timeline 2 TIMELINETWO y "Record a note"
    fi
    tm send-keys -t lab C-c; sleep 0.5; tm send-keys -t lab C-c; sleep 1
  done
  tm kill-server 2>/dev/null
  cp "$W/logs/codex/requests.jsonl" "$OUT/$CLI/server-requests.jsonl" 2>/dev/null
}

for c in $ONLY; do
  case "$c" in
    claude) run_claude ;;
    codex) run_codex ;;
  esac
done
log "done; labels in $LABELS"
