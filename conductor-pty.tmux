#!/usr/bin/env bash
# conductor pty as a tmux plugin (TPM: `set -g @plugin '<owner>/conductor-pty'`, or without TPM
# `run-shell /path/to/conductor-pty.tmux` in tmux.conf). Every @conductor-* option is read when
# this runs: set them above the plugin line. Options and what they do: README, "tmux plugin".
#
# Runs inside the tmux server it configures ($TMUX names it). Everything handed to tmux is
# checked or quoted here: a path or option value never becomes tmux or shell syntax.

set -u

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MARK="conductor-pty-segment"  # in the segment, so a second run does not append it again
PLACEHOLDER='#{conductor_status}'  # where the user wants the segment, like #{cpu_percentage}
# On the right with tmux 3.2+, status-right-length is raised to this so the client's width, not
# a length fixed once, decides the segment's room (the format below takes the smaller).
WIDE=1000

option() {  # option NAME DEFAULT: the global @option's value, or DEFAULT when unset
	local value
	value="$(tmux show-option -gqv "$1")"
	printf '%s' "${value:-$2}"
}

say() {  # '#' doubled: display-message expands formats, and #(...) would run a command
	local text="conductor-pty: $*"
	tmux display-message -d 8000 "${text//\#/##}"
}

quote() {  # one word for sh -c, whatever it holds
	printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"
}

conductor_bin() {
	local bin
	bin="$(option @conductor-bin "")"
	# Installed on PATH (pipx, uv tool) first, then this checkout's own venv (scripts/install.sh).
	[ -z "$bin" ] && bin="$(command -v conductor || true)"
	[ -z "$bin" ] && [ -x "$HERE/.venv/bin/conductor" ] && bin="$HERE/.venv/bin/conductor"
	printf '%s' "$bin"
}

BIN="$(conductor_bin)"
if [ -z "$BIN" ] || [ ! -x "$BIN" ]; then
	say "no conductor command found; run scripts/install.sh in $HERE or set @conductor-bin"
	exit 0
fi
case "$BIN" in
*[\#\(\)\{\}\"\\]* | *$'\n'*)
	# '#', parentheses and braces would end or open a tmux format around the command.
	say "@conductor-bin path has characters tmux formats cannot hold: $BIN"
	exit 0
	;;
esac
QBIN="$(quote "$BIN")"

# The commands bound below run with the server's environment, where TMUX is not passed on to
# conductor's own tmux calls: name the server by its socket (as `tmux -L NAME` does).
SOCKET="$(basename "$(tmux display-message -p '#{socket_path}')")"
QSOCKET="$(quote "$SOCKET")"

style_env() {  # CONDUCTOR_STATUS_STYLE from the @conductor-colour-* options that are set
	local spec="" state key value
	for state in ready busy needs-confirmation error unknown; do
		value="$(option "@conductor-colour-$state" "")"
		[ -z "$value" ] && continue
		case "$value" in
		*[!a-z0-9,=-]*)
			say "@conductor-colour-$state: use tmux style words like fg=black,bg=yellow,bold"
			continue
			;;
		esac
		key="$(printf '%s' "$state" | tr 'a-z-' 'A-Z_')"
		spec="$spec$key=$value;"
	done
	[ -n "$spec" ] && printf "CONDUCTOR_STATUS_STYLE='%s' " "$spec"
}

room() {  # room SIDE OFFSET: a tmux format (3.2+) for the columns the segment may use
	# tmux shows at most status-SIDE-length of that side and at most the client's width (on
	# the right, less the left part's room), and the user's part takes OFFSET of it. Expanded
	# per client whenever the line is drawn, so a resize or a new length counts at once.
	local limit="#{status-$1-length}" width="#{client_width}"
	[ "$1" = right ] && width="#{e|-|:#{client_width},#{status-left-length}}"
	printf '#{e|-|:#{?#{e|<|:%s,%s},%s,%s},%s}' "$width" "$limit" "$width" "$limit" "$2"
}

format_math() {  # tmux 3.2 or newer: formats can add, subtract and compare (#{e|-|:a,b})
	local version major minor
	version="$(tmux -V | sed -n 's/^[^0-9]*\([0-9][0-9]*\)\.\([0-9][0-9]*\).*/\1 \2/p')"
	[ -z "$version" ] && return 0  # a development build ("tmux master"): a new one
	major="${version% *}"
	minor="${version#* }"
	[ "$major" -gt 3 ] || { [ "$major" -eq 3 ] && [ "$minor" -ge 2 ]; }
}

segment_for() {  # segment_for WIDTH: the #(...) that prints the line in WIDTH columns
	printf '%s' "#($(style_env)$QBIN -L $QSOCKET pty status --short --colour --width $1; : $MARK)"
}

place_at_placeholder() {  # place_at_placeholder SIDE: 0 when the user's #{conductor_status} took it
	local side="$1" current before after shown width reserve length
	current="$(tmux show-option -gqv "status-$side")"
	case "$current" in *"$PLACEHOLDER"*) ;; *) return 1 ;; esac
	before="${current%%"$PLACEHOLDER"*}"
	after="${current#*"$PLACEHOLDER"}"
	# The user's own part, without the placeholder, as add_status_segment counts it.
	tmux set-option -g @conductor-pty-rest "$before$after"
	shown="$(tmux display-message -p "#{n:@conductor-pty-rest}")"
	tmux set-option -gu @conductor-pty-rest
	reserve="$(option @conductor-status-length 60)"
	case "$reserve" in '' | *[!0-9]*) reserve=60 ;; esac
	length="$(tmux show-option -gqv "status-$side-length")"
	if format_math; then
		width="$(room "$side" "$shown")"
	else
		width="$reserve"
	fi
	if [ "$side" = right ] && format_math; then
		[ "$length" -lt "$WIDE" ] && tmux set-option -g status-right-length "$WIDE"
	elif [ $((shown + reserve)) -gt "$length" ]; then
		tmux set-option -g "status-$side-length" $((shown + reserve))
	fi
	tmux set-option -g "status-$side" "$before$(segment_for "$width")$after"
}

add_status_segment() {
	local where side current length reserve shown width placed
	where="$(option @conductor-status right)"
	placed="$(option @conductor-pty-placed "")"
	if [ -n "$placed" ]; then  # put at the user's placeholder by an earlier run: stays there
		case "$(tmux show-option -gqv "status-$placed")" in *"$MARK"*) return ;; esac
	fi
	# A placeholder in either part is the user's choice of place, whatever @conductor-status.
	for side in right left; do
		if place_at_placeholder "$side"; then
			tmux set-option -g @conductor-pty-placed "$side"
			set_interval
			return
		fi
	done
	case "$where" in
	right | left) side="$where" ;;
	off) return ;;
	*) say "@conductor-status must be right, left or off, not $where"; return ;;
	esac
	current="$(tmux show-option -gqv "status-$side")"
	case "$current" in *"$MARK"*) return ;; esac
	# Room for the segment beside what was there: the user's part shows at most its length
	# limit (and at most its format's own length), plus @conductor-status-length.
	length="$(tmux show-option -gqv "status-$side-length")"
	shown="$(tmux display-message -p "#{n:status-$side}")"
	[ "$shown" -gt "$length" ] && shown="$length"
	reserve="$(option @conductor-status-length 60)"
	case "$reserve" in '' | *[!0-9]*) reserve=60 ;; esac
	[ -z "$current" ] && shown=-1
	if format_math; then
		width="$(room "$side" $((shown + 1)))"
	else
		width="$reserve"  # the room raised below, at least
	fi
	segment="$(segment_for "$width")"
	if [ -z "$current" ]; then
		tmux set-option -g "status-$side" "$segment"
	elif [ "$side" = right ]; then
		tmux set-option -g "status-$side" "$current $segment"
	else
		tmux set-option -g "status-$side" "$segment $current"
	fi
	if [ "$side" = right ] && format_math; then
		# The client's width decides (room): a terminal of 250 columns holds 250 less the rest.
		[ "$length" -lt "$WIDE" ] && tmux set-option -g status-right-length "$WIDE"
	elif [ $((shown + 1 + reserve)) -gt "$length" ]; then
		tmux set-option -g "status-$side-length" $((shown + 1 + reserve))
	fi
	set_interval
}

set_interval() {
	local interval
	interval="$(option @conductor-status-interval "")"
	case "$interval" in
	'') ;;
	*[!0-9]*) say "@conductor-status-interval must be whole seconds, not $interval" ;;
	*) tmux set-option -g status-interval "$interval" ;;
	esac
}

bind_key() {  # bind_key OPTION DEFAULT COMMAND...: leaves a key the user bound alone
	local key existing
	key="$(option "$1" "$2")"
	shift 2
	[ -z "$key" ] || [ "$key" = none ] && return
	existing="$(tmux list-keys -T prefix "$key" 2>/dev/null || true)"
	if [ -n "$existing" ] && [ "${existing#* pty s}" = "$existing" ]; then
		say "prefix $key is already bound; set another key in @conductor-*-key"
		return
	fi
	tmux bind-key -T prefix "$key" "$@"
}

add_status_segment
# run-shell expands #{pane_id} to the pane the key was pressed in; -b: tmux does not wait.
bind_key @conductor-next-key N run-shell -b \
	"$QBIN -L $QSOCKET pty switch --next --from '#{pane_id}' >/dev/null"
bind_key @conductor-popup-key S display-popup -E -w 90% -h 70% \
	"$QBIN -L $QSOCKET pty status --watch"

if [ "$(option @conductor-start-watcher off)" = on ]; then
	# A second watcher for the same store exits at once, so this is safe on every reload.
	tmux run-shell -b "$QBIN -L $QSOCKET pty watch --quiet >/dev/null 2>&1"
fi
exit 0
