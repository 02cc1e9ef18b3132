#!/usr/bin/env bash
# ci-gate.sh: the checks a change to a latch policy must pass before it merges. The GitHub Action
# in action.yml runs this script; run it the same way anywhere else.
#
#   scripts/ci-gate.sh --policy FILE [--base FILE] [--chain FILE|URL] [--scan on|off]
#                      [--scan-dir DIR] [--badge FILE] [--latch BIN]
#
# Steps, each reported in a Markdown summary (on stdout, and appended to $GITHUB_STEP_SUMMARY
# when it is set):
#   1. latch check --strict         the policy loads with no warning;
#   2. latch verify --badge FILE    the guarantee catalogue passes against the policy in a
#                                   scratch store (never a real one); the badge is written;
#   3. latch scan (--scan on)       no consequential call in --scan-dir's Go packages escapes
#                                   latch; skipped, saying so, when this latch has no scan;
#   4. latch policy replay (--chain) the recorded calls of the chain (a SQLite store file, or a
#                                   store URL) are re-decided under --base (default: as they
#                                   were recorded) and under --policy; a call the new policy
#                                   decides less strictly (deny→approve, deny→allow,
#                                   approve→allow) is a weakening, and fails the gate. With
#                                   --base, latch coverage says which of its rules the chain
#                                   never exercised (where a weakening cannot show).
#
# Exit status: 0 every step that ran passed; 1 a step failed; 2 bad usage.
set -uo pipefail

usage() {
	sed -n '5,6p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

latch=latch
policy="" base="" chain="" scan=off scan_dir=. badge=""
while [ $# -gt 0 ]; do
	case "$1" in
	--policy) policy=${2-} ;;
	--base) base=${2-} ;;
	--chain) chain=${2-} ;;
	--scan) scan=${2-} ;;
	--scan-dir) scan_dir=${2-} ;;
	--badge) badge=${2-} ;;
	--latch) latch=${2-} ;;
	-h | --help) usage ;;
	*)
		echo "ci-gate: unknown argument $1" >&2
		usage
		;;
	esac
	[ $# -ge 2 ] || { echo "ci-gate: $1 needs a value" >&2; usage; }
	shift 2
done
[ -n "$policy" ] || { echo "ci-gate: --policy FILE is required" >&2; usage; }
[ -f "$policy" ] || { echo "ci-gate: --policy $policy: no such file" >&2; exit 2; }
[ -z "$base" ] || [ -f "$base" ] || { echo "ci-gate: --base $base: no such file" >&2; exit 2; }
case "$scan" in on | true | 1) scan=on ;; off | false | 0 | "") scan=off ;; *)
	echo "ci-gate: --scan $scan: want on or off" >&2
	exit 2
	;;
esac
command -v "$latch" >/dev/null 2>&1 || { echo "ci-gate: no latch binary at $latch (--latch BIN, or latch on PATH)" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
summary="$work/summary.md"
{
	echo "## latch CI gate"
	echo
	echo "Policy: \`$policy\`"
	echo
	echo "| Step | Result |"
	echo "| --- | --- |"
} >"$summary"
details="$work/details.md"
: >"$details"

# row STEP RESULT: one line of the summary's table.
row() { printf '| %s | %s |\n' "$1" "$2" >>"$summary"; }

# block TITLE FILE: a command's output under the table, fenced.
block() {
	{
		echo
		echo "<details><summary>$1</summary>"
		echo
		echo '```'
		# A fence inside the output would end the block early.
		sed 's/```/` ` `/g' "$2"
		echo '```'
		echo
		echo "</details>"
	} >>"$details"
}

# 1. The policy loads strictly.
echo "ci-gate: latch check --strict --policy $policy"
if "$latch" check --strict --policy "$policy" >"$work/check.out" 2>&1; then
	row "latch check --strict" "pass"
else
	row "latch check --strict" "**FAIL**"
	failed=1
fi
cat "$work/check.out"
block "latch check --strict" "$work/check.out"

# 2. The guarantee catalogue, in a scratch store.
echo "ci-gate: latch verify --policy $policy"
verify_args=(verify --policy "$policy" --store "sqlite:$work/scratch/state.db")
[ -z "$badge" ] || verify_args+=(--badge "$badge")
mkdir -p "$work/scratch"
"$latch" "${verify_args[@]}" >"$work/verify.out" 2>&1
code=$?
verdict=$(grep -E '^[0-9]+/[0-9]+ declared guarantees pass' "$work/verify.out" | head -n1 | cut -d' ' -f1)
case $code in
0) row "latch verify" "pass (${verdict:-?})" ;;
2)
	row "latch verify" "**FAIL**: no guarantee is applicable to this policy"
	failed=1
	;;
*)
	row "latch verify" "**FAIL** (${verdict:-exit $code})"
	failed=1
	;;
esac
[ -z "$badge" ] || { [ -f "$badge" ] && row "badge" "\`$badge\`"; }
cat "$work/verify.out"
block "latch verify" "$work/verify.out"

# 3. The static scan, when asked for and when this latch has it.
if [ "$scan" = on ]; then
	if "$latch" scan --help >/dev/null 2>&1; then
		echo "ci-gate: latch scan --dir $scan_dir"
		if "$latch" scan --dir "$scan_dir" >"$work/scan.out" 2>&1; then
			row "latch scan" "pass"
		else
			row "latch scan" "**FAIL**"
			failed=1
		fi
		cat "$work/scan.out"
		block "latch scan" "$work/scan.out"
	else
		echo "ci-gate: this latch has no scan command: the scan is skipped"
		row "latch scan" "skipped: this latch has no scan command"
	fi
else
	row "latch scan" "off"
fi

# 4. The recorded calls, re-decided under the base policy and the new one.
if [ -n "$chain" ]; then
	store=$chain
	case "$chain" in
	sqlite:* | postgres://* | postgresql://*) ;;
	*)
		[ -f "$chain" ] || { echo "ci-gate: --chain $chain: no such file" >&2; exit 2; }
		# A copy: replay only reads, but SQLite may still touch a store's journal files.
		mkdir -p "$work/chain"
		cp "$chain" "$work/chain/state.db"
		for f in "$chain-wal" "$chain-shm"; do [ ! -f "$f" ] || cp "$f" "$work/chain/state.db${f#"$chain"}"; done
		store="sqlite:$work/chain/state.db"
		;;
	esac
	command -v jq >/dev/null 2>&1 || { echo "ci-gate: the replay comparison needs jq" >&2; exit 2; }
	replay() { # replay POLICY OUT
		"$latch" policy replay "$1" --store "$store" --json >"$2" 2>"$2.err"
	}
	echo "ci-gate: latch policy replay $policy against $chain"
	ok=1
	replay "$policy" "$work/new.json" || ok=0
	if [ -n "$base" ]; then
		replay "$base" "$work/base.json" || ok=0
	else
		echo '{"changes":[],"truncated":false}' >"$work/base.json"
	fi
	if [ $ok = 0 ]; then
		cat "$work"/*.json.err >&2
		row "latch policy replay" "**FAIL**: the chain could not be replayed"
		cat "$work"/*.json.err >"$work/replay.out"
		block "latch policy replay" "$work/replay.out"
		failed=1
	elif jq -e -s 'any(.[]; .truncated)' "$work/base.json" "$work/new.json" >/dev/null; then
		row "latch policy replay" "**FAIL**: more changed calls than a replay lists; record a shorter chain"
		failed=1
	else
		# Each changed call's decision under each policy: its replayed decision, else the one it
		# was recorded with. A weakening is a call the new policy decides less strictly.
		jq -n --slurpfile b "$work/base.json" --slurpfile n "$work/new.json" '
			def rank: if . == "allow" then 0 elif . == "approve" then 1 else 2 end;
			def bySeq: map({key: (.seq | tostring), value: .}) | from_entries;
			($b[0].changes | bySeq) as $B | ($n[0].changes | bySeq) as $N
			| [($B + $N) | to_entries[] | .key as $k | .value as $c
				| (($B[$k].to) // $c.from) as $was | (($N[$k].to) // $c.from) as $now
				| select(($now | rank) < ($was | rank))
				| {seq: ($k | tonumber), action: $c.action, agent: ($c.principal.agent // ""), effect_key: ($c.effect_key // ""),
				   from: $was, to: $now, reason: (($N[$k].reason) // "")}]
			| sort_by(.seq)' >"$work/weakened.json"
		replayed=$(jq -r '.replayed' "$work/new.json")
		weakened=$(jq 'length' "$work/weakened.json")
		if [ "$weakened" -eq 0 ]; then
			row "latch policy replay" "pass: $replayed recorded calls, none decided less strictly"
		else
			row "latch policy replay" "**FAIL**: $weakened of $replayed recorded calls decided less strictly"
			failed=1
			{
				echo
				echo "### Weakened decisions"
				echo
				echo "| Seq | Action | Agent | Effect key | Was | Now | Reason |"
				echo "| --- | --- | --- | --- | --- | --- | --- |"
				# The names come from recorded calls: each is shown as code, with what would end
				# the code span or the row (a backtick, a pipe, a line break) and angle brackets
				# replaced, so that none of it renders as Markdown or HTML.
				jq -r 'def cell: tostring | gsub("[|\r\n<>`]"; "_") | if . == "" then "-" else "`" + . + "`" end;
					.[] | "| \(.seq) | \(.action | cell) | \(.agent | cell) | \(.effect_key | cell) | \(.from) | \(.to) | \(.reason | cell) |"' "$work/weakened.json"
			} >>"$summary"
			jq -r '.[] | "ci-gate: weakened: seq \(.seq) \(.action): \(.from) -> \(.to) (\(.reason))"' "$work/weakened.json"
		fi
	fi
	# What the chain exercised of the base policy: a weakening of a rule no recorded call reached
	# cannot show in a replay. Said in the summary; it does not fail the gate.
	if [ -n "$base" ]; then
		if "$latch" coverage --policy "$base" --store "$store" --json >"$work/coverage.json" 2>"$work/coverage.err"; then
			unexercised=$(jq -r '[.never_fired[] | "`\(.action)` \(.rule) (line \(.line))"] | join(", ")' "$work/coverage.json")
			others=$(jq -r '.other_policies' "$work/coverage.json")
			note=""
			[ "$others" = 0 ] || note=" ($others recorded calls were decided under another policy than the base)"
			if [ -z "$unexercised" ]; then
				row "recorded chain coverage" "every rule of the base policy decided a recorded call$note"
			else
				row "recorded chain coverage" "never exercised, so a weakening there cannot show: $unexercised$note"
			fi
		else
			row "recorded chain coverage" "unknown: latch coverage could not read the chain"
			cat "$work/coverage.err" >&2
		fi
	fi
else
	row "latch policy replay" "skipped: no recorded chain given"
fi

if [ $failed = 0 ]; then
	echo >>"$summary"
	echo "**The gate passes.**" >>"$summary"
else
	echo >>"$summary"
	echo "**The gate fails.**" >>"$summary"
fi
echo
cat "$summary" # the table; the commands' output was printed above
cat "$details" >>"$summary"
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
	cat "$summary" >>"$GITHUB_STEP_SUMMARY"
fi
exit $failed
