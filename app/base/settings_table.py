"""The one table of settings: each key of the config file once, with its default, its rule, the
comment the config file shows above it, and the object field it ends up in.

The config template and its validation (``app.run.configfile``), the ``DEFAULT_*`` constants the
settings objects take their defaults from, and the key tables of ``design/config.md`` are all made
from :data:`TABLE`; ``tests/run/test_settings_table.py`` fails when any of them says otherwise.
A default is written here and nowhere else.

Plain data and the standard library only: modules of every layer read their defaults from it.
"""

from __future__ import annotations

from typing import Any, NamedTuple, TypeVar

T = TypeVar("T")


class Rule(NamedTuple):
    """What a number must be, or, for other values, the check the config file makes, in words."""

    low: float | None = None
    high: float | None = None
    above: bool = False  # low itself excluded
    words: str = ""  # a rule that is not a range, as the reference page says it

    def describe(self, whole: bool) -> str:
        kind = "a whole number" if whole else "a number"
        if self.low is not None and self.high is not None:
            return f"{kind} from {_number(self.low)} to {_number(self.high)}"
        if self.low is not None:
            return f"{kind} {'>' if self.above else '≥'} {_number(self.low)}"
        return kind

    def holds(self, value: float) -> bool:
        if self.low is not None and (value <= self.low if self.above else value < self.low):
            return False
        return self.high is None or value <= self.high


def _number(value: float) -> str:
    # 1000000, not :g's 1e+06: people type the number the message shows.
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


POSITIVE = Rule(0, above=True)
NOT_NEGATIVE = Rule(0)
AT_LEAST_ONE = Rule(1)
ANY = Rule()
STATES = Rule(words="state names: READY, BUSY, NEEDS_CONFIRMATION (or NEEDS_CONF), ERROR, "
                    "UNKNOWN, EXITED")


class Setting(NamedTuple):
    key: str  # dotted: table and key, "watch.interval"
    default: Any  # float, int, bool, str, or a tuple of strings (a TOML list)
    rule: Rule
    comment: str  # the config file's comment above the key, its lines as they are written
    goes_to: str  # the field it sets, "WatchSettings.interval_s"; "" when none
    env: str = ""  # an environment variable that wins over the file


TABLE: tuple[Setting, ...] = (
    Setting("watch.interval", 5.0, POSITIVE,
            "Seconds between two looks at every pane.",
            "WatchSettings.interval_s"),
    Setting("watch.force_capture", 30.0, POSITIVE,
            "Seconds after which a pane is captured again even though tmux reports no output, "
            "in case\ntmux's one-second activity clock hid a change.",
            "WatchSettings.force_capture_s"),
    Setting("watch.events", True, ANY,
            "true: tmux control mode tells the watcher the moment a pane prints, and the poll "
            "above is\nonly the safety net; false: polling only.",
            "WatchSettings.events"),
    Setting("watch.min_capture", 0.25, NOT_NEGATIVE,
            "Seconds: a pane that prints nonstop is captured at most this often.",
            "WatchSettings.min_capture_s"),
    Setting("watch.history_rows", 1000, AT_LEAST_ONE,
            "State changes kept in the history, per pane.",
            "WatchSettings.history_rows_per_pane"),
    Setting("watch.history_days", 7.0, NOT_NEGATIVE,
            "Days of history kept.",
            "WatchSettings.history_days"),

    Setting("states.ready_polls", 0, NOT_NEGATIVE,
            "Polls with the same screen before a pane counts as READY; 0 = each CLI pack's own "
            "value.",
            "WatchSettings.stable_polls"),
    Setting("states.ready_min_seconds", 1.5, NOT_NEGATIVE,
            "Seconds the screen must also stay the same before READY, so fast polling cannot "
            "call a\npause READY.",
            "WatchSettings.ready_min_s"),
    Setting("states.busy_polls", 1, AT_LEAST_ONE,
            "Polls a BUSY verdict must hold before it is reported (leaving READY is always "
            "immediate).",
            "WatchSettings.busy_polls"),
    Setting("states.confirmation_polls", 1, AT_LEAST_ONE,
            "Polls a NEEDS_CONFIRMATION verdict must hold before it is reported.",
            "WatchSettings.confirmation_polls"),
    Setting("states.error_polls", 2, AT_LEAST_ONE,
            "Polls an ERROR verdict must hold before it is reported.",
            "WatchSettings.error_polls"),
    Setting("states.waiting_grace", 120.0, NOT_NEGATIVE,
            "Seconds in READY or NEEDS_CONFIRMATION after which a pane counts as waiting long.",
            "WatchSettings.waiting_grace_s"),
    Setting("states.send_grace", 3.0, NOT_NEGATIVE,
            "Seconds after `conductor pty send` during which READY is not believed unless the "
            "pane\nvisibly left READY: a CLI still looks idle for a moment after Enter.",
            "WatchSettings.send_grace_s"),
    Setting("states.exited_shown", 600.0, NOT_NEGATIVE,
            "Seconds an EXITED pane (its program ended, or it was closed) stays in `conductor "
            "pty status`;\n`status --all` shows it until the history retention removes it.",
            "WatchSettings.exited_shown_s"),

    Setting("notify.states", ("READY", "NEEDS_CONFIRMATION", "ERROR", "EXITED"), STATES,
            "States that notify: any of READY, BUSY, NEEDS_CONFIRMATION, ERROR, UNKNOWN, "
            "EXITED.\nA kind below may narrow or widen this with its own list.",
            "NotifySettings.states"),
    Setting("notify.min_interval", 10.0, NOT_NEGATIVE,
            "Seconds: at most one notification per pane and state in this time.",
            "NotifySettings.min_interval"),
    Setting("notify.skip_focused", False, ANY,
            "true: no notification for the pane you are looking at in tmux.",
            "NotifySettings.skip_focused"),
    Setting("notify.timeout", 5.0, POSITIVE,
            "Seconds a notification program may run before it is killed.",
            "NotifySettings.timeout"),
    Setting("notify.sound_needs_you", True, ANY,
            "true: a sound for what needs you (a question, a \"needs you\" note): a bell in the "
            "terminal,\nthe desktop notification's sound.",
            "NotifySettings.sound_needs_you"),
    Setting("notify.sound_done", False, ANY,
            "true: a sound for the rest too (a turn done, an error, an exit).",
            "NotifySettings.sound_done"),
    Setting("notify.desktop_buttons", True, ANY,
            "true: a dialog's desktop notification has Approve, Deny and Open buttons where "
            "the\nnotification server draws them; a press answers only the dialog it was shown "
            "for, once.",
            "NotifySettings.desktop_buttons"),
    Setting("notify.tmux.enabled", True, ANY,
            "A message on the tmux status line of every attached client.",
            "NotifySettings.kinds"),
    Setting("notify.tmux.states", (), STATES,
            "States for this kind; empty = the states of [notify].",
            "NotifySettings.states_by_kind"),
    Setting("notify.desktop.enabled", True, ANY,
            "A desktop notification: notify-send on Linux, osascript on macOS.",
            "NotifySettings.kinds"),
    Setting("notify.desktop.states", (), STATES,
            "States for this kind; empty = the states of [notify].",
            "NotifySettings.states_by_kind"),
    Setting("notify.command.argv", (), ANY,
            "Your own program, as a list: [\"notify-me\", \"--urgent\"]. It runs without a "
            "shell and gets\nthe event in CONDUCTOR_* environment variables. Empty = no program.",
            "NotifySettings.notify_command"),
    Setting("notify.command.enabled", True, ANY,
            "Run the program above (when there is one).",
            "NotifySettings.kinds"),
    Setting("notify.command.states", (), STATES,
            "States for this kind; empty = the states of [notify].",
            "NotifySettings.states_by_kind"),
    Setting("notify.terminal.enabled", False, ANY,
            "Escape sequences (OSC 9, 99, 777) your terminal shows as a notification, written to "
            "the\nterminals attached to the pane's session, over ssh too. Off: it writes to your "
            "terminal\nbehind tmux's back (design/notifications.md).",
            "NotifySettings.kinds"),
    Setting("notify.terminal.states", (), STATES,
            "States for this kind; empty = the states of [notify].",
            "NotifySettings.states_by_kind"),

    Setting("llm.model", "openai/gpt-4o-mini", Rule(words="not empty"),
            "The optional LLM classifier; it is on when OPENROUTER_API_KEY is set and "
            "CONDUCTOR_LLM is\nnot off. Model name on OpenRouter (env CONDUCTOR_LLM_MODEL).",
            "LLMSettings.model", "CONDUCTOR_LLM_MODEL"),
    Setting("llm.base_url", "https://openrouter.ai/api/v1",
            Rule(words="starts with http:// or https://"),
            "API base URL (env OPENROUTER_BASE_URL).",
            "LLMSettings.base_url", "OPENROUTER_BASE_URL"),
    Setting("llm.timeout", 10.0, Rule(0.1, 600.0),
            "Seconds for one classification, retries included (env CONDUCTOR_LLM_TIMEOUT).",
            "LLMSettings.timeout", "CONDUCTOR_LLM_TIMEOUT"),
    Setting("llm.calls_per_minute", 20, Rule(1, 10_000),
            "Most HTTP requests per minute, retries included (env "
            "CONDUCTOR_LLM_CALLS_PER_MINUTE).",
            "LLMSettings.calls_per_minute", "CONDUCTOR_LLM_CALLS_PER_MINUTE"),
    Setting("llm.max_screen_chars", 4000, Rule(200, 200_000),
            "Characters from the bottom of the screen that are sent (env "
            "CONDUCTOR_LLM_MAX_SCREEN_CHARS).",
            "LLMSettings.max_screen_chars", "CONDUCTOR_LLM_MAX_SCREEN_CHARS"),
    Setting("llm.exclude", (), ANY,
            "Panes never sent to the LLM: pane ids, session:window or worker names, globs "
            "allowed,\ne.g. [\"%3\", \"secrets:*\"] (env CONDUCTOR_LLM_EXCLUDE).",
            "LLMSettings.exclude", "CONDUCTOR_LLM_EXCLUDE"),

    Setting("wait.poll_interval", 0.5, POSITIVE,
            "Seconds between two looks at the pane by `conductor pty wait`.",
            "Config.wait_poll_s"),

    Setting("create.remain_on_exit", True, ANY,
            "true: windows made by `conductor pty create` keep their last screen when the "
            "program exits\n(tmux remain-on-exit), so a crashed agent shows what happened and "
            "reads ERROR with its status.",
            "Config.remain_on_exit"),
    Setting("create.worktrees", "../{repo}-worktrees",
            Rule(words="a relative folder; {repo} the only placeholder"),
            "Where `conductor pty create DIR --worktree BRANCH` puts each agent's git worktree: "
            "a folder\nrelative to the repository's top, {repo} standing for its name (one "
            "subfolder per branch).",
            "Config.worktrees"),

    Setting("herd.stall_after", 120.0, NOT_NEGATIVE,
            "Herding nudges only panes opted in with `conductor pty herd on ID`. Seconds a READY "
            "pane\nmust sit with no screen change, no send and no nudge before it counts as "
            "stalled.",
            "HerdSettings.stall_after_s"),
    Setting("herd.stability", 5.0, NOT_NEGATIVE,
            "Seconds a state must have lasted before a pane can be nudged at all.",
            "HerdSettings.stability_s"),
    Setting("herd.confidence_min", 60, Rule(0, 100),
            "Lowest confidence (0-100) of the pane's state for a nudge.",
            "HerdSettings.confidence_min"),
    Setting("herd.cooldown", 120.0, NOT_NEGATIVE,
            "Seconds between two nudges of the same pane.",
            "HerdSettings.cooldown_s"),
    Setting("herd.max_nudges", 3, NOT_NEGATIVE,
            "Nudges until a person acts on the pane (a send, typing, a turn they start); then "
            "it waits\nfor you.",
            "HerdSettings.max_nudges"),
    Setting("herd.rules", "conservative", Rule(words="names a rule set"),
            "Rule set `herd on` uses without --rules: a bundled name (conservative, "
            "persistent), a name\nin herd_rules/ next to this file, or a path to a .yml file.",
            "HerdSettings.rules"),

    Setting("cycle.wait", 15.0, NOT_NEGATIVE,
            "After `conductor pty report`: seconds to wait before assessing when the report "
            "names no\ncheck command (--wait-cmd).",
            "CycleSettings.wait_s"),
    Setting("cycle.idle", 3.0, NOT_NEGATIVE,
            "Then the pane must be READY, or its screen unchanged this many seconds...",
            "CycleSettings.idle_s"),
    Setting("cycle.spin_max", 45.0, NOT_NEGATIVE,
            "...but the assessment starts after this many seconds whatever the screen does.",
            "CycleSettings.spin_max_s"),
    Setting("cycle.command_timeout", 600.0, POSITIVE,
            "Seconds a check command may run before it is killed (then the pane is paused).",
            "CycleSettings.cmd_timeout_s"),
    Setting("cycle.output_chars", 4000, Rule(100, 1_000_000),
            "Characters of the check command's output kept (its end) for the decide.",
            "CycleSettings.output_chars"),
    Setting("cycle.transcript_entries", 20, Rule(1, 1000),
            "Reports and directives kept per pane for the assessor, newest last.",
            "CycleSettings.transcript_entries"),
    Setting("cycle.allowed_checks", (),
            Rule(words="each not empty, at most 1,000 characters, no control characters"),
            "Check commands an agent's report (the MCP tool) may have the watcher run in any "
            "pane, as\nexact text, e.g. [\"pytest -q\", \"make test\"]. Besides these, only the "
            "check you declare for a\npane (`conductor pty goal ID TEXT --check CMD`) runs; your "
            "own `report --wait-cmd` always does.",
            "CycleSettings.allowed_checks"),

    Setting("queue.ttl", 3600.0, POSITIVE,
            "Seconds a message queued with `send --queue` waits for a READY pane before it "
            "expires.",
            "CycleSettings.queue_ttl_s"),

    Setting("mcp.send_to", (), Rule(words="no empty entry"),
            "An agent's MCP server (`conductor pty mcp`) types only into the pane it runs in. "
            "Panes its\n`send` tool may type into as well: names or ids (%N or conductor's id), "
            "globs allowed, e.g.\n[\"reviewer\", \"%7\"]; [\"*\"] = every pane of its tmux "
            "server. Read on every call.",
            "McpSettings.send_to"),

    Setting("serve.address", "127.0.0.1", Rule(words="an IP address of this machine"),
            "`conductor pty serve` (the answer page for a phone) listens here only when you run "
            "it; another\naddress than 127.0.0.1 (a Tailscale one, say) only when you name it, "
            "here or with --bind.",
            "ServeSettings.address"),
    Setting("serve.port", 8765, Rule(0, 65535),
            "Its TCP port (0: any free port, printed at start).",
            "ServeSettings.port"),
    Setting("serve.link_ttl", 600.0, POSITIVE,
            "Seconds an answer link stays valid; each works once, and only on the dialog it "
            "was made for.",
            "ServeSettings.link_ttl_s"),
    Setting("serve.bad_requests_per_minute", 20, AT_LEAST_ONE,
            "Bad links or page keys from one address per minute before it is refused (429) "
            "for a while.",
            "ServeSettings.bad_per_minute"),
    Setting("budget.pane_usd", 0.0, NOT_NEGATIVE,
            "USD one pane's agent may spend (priced with the [prices] tables) before herding "
            "and the\nreport cycle stop typing into it; 0 = no limit. `conductor pty budget "
            "reset` starts it again.",
            "Budget.pane_usd"),
    Setting("budget.pane_tokens", 0, NOT_NEGATIVE,
            "Tokens (input, output and cache writes) one pane's agent may use before herding "
            "and the\nreport cycle stop typing into it; 0 = no limit.",
            "Budget.pane_tokens"),
    Setting("budget.day_usd", 0.0, NOT_NEGATIVE,
            "USD all panes together may spend in one day (the local calendar day) before "
            "herding and the\nreport cycle stop for every pane; 0 = no limit.",
            "Budget.day_usd"),
    Setting("budget.day_tokens", 0, NOT_NEGATIVE,
            "Tokens all panes together may use in one day before herding and the report "
            "cycle stop for\nevery pane; 0 = no limit.",
            "Budget.day_tokens"),
)

BY_KEY: dict[str, Setting] = {setting.key: setting for setting in TABLE}


def default(key: str, kind: type[T]) -> T:
    """The default of ``key``, checked to be a ``kind``, for a module's ``DEFAULT_*`` constant."""
    value = BY_KEY[key].default
    # bool is an int to Python, and an int default stands for a whole number only.
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise TypeError(f"the default of {key} is {value!r}, not a {kind.__name__}")
    return value


def rule_words(setting: Setting) -> str:
    """What a value of ``setting`` must be, as the reference page and the errors say it."""
    value = setting.default
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, (int, float)):
        return setting.rule.describe(whole=isinstance(value, int))
    kind = "a string" if isinstance(value, str) else "a list of strings"
    return f"{kind}: {setting.rule.words}" if setting.rule.words else kind


def bounds(key: str) -> tuple[float, float]:
    """The lowest and highest value of ``key``, for a key with a closed range."""
    rule = BY_KEY[key].rule
    if rule.low is None or rule.high is None:
        raise TypeError(f"{key} has no closed range")
    return rule.low, rule.high


def tables() -> list[str]:
    """The config file's tables ("watch", "notify.tmux", ...) in the order they are written."""
    return list(dict.fromkeys(setting.key.rsplit(".", 1)[0] for setting in TABLE))
