package policy

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Keys of the retention section, in the order error messages list them.
var retentionKeys = []string{"settled_effects"}

// MaxRetention bounds retention.settled_effects: longer than a century is "for ever", which is
// what leaving the key out says.
const MaxRetention = MaxDays * 24 * time.Hour

// Retention is the policy's retention section (docs/retention.md): how long `latch prune` keeps
// what a prune could otherwise remove.
type Retention struct {
	// SettledEffects is how long a committed or failed effect is kept after it settled: while
	// it is kept, a duplicate of its call is answered from it (committed) or counted against
	// max_attempts (failed); once a prune removes it, the same effect key runs again. 0 (the
	// key left out) keeps every settled effect for ever. Executing and ambiguous effects are
	// always kept.
	SettledEffects time.Duration
	Pos            Position // of the retention key
}

func (p *parser) retention(e entry) (*Retention, *Error) {
	if e := p.mapping(e, "retention", "a mapping with settled_effects"); e != nil {
		return nil, e
	}
	r := &Retention{Pos: posOf(e.k)}
	for _, en := range entries(e.v) {
		switch en.k.Value {
		case "settled_effects":
			d, e := p.retentionDuration(en, "retention.settled_effects")
			if e != nil {
				return nil, e
			}
			r.SettledEffects = d
		default:
			return nil, p.unknownKey(en.k, "in retention", retentionKeys)
		}
	}
	return r, nil
}

// retentionDuration reads a duration of days or more: a whole number of days (90d), or a Go
// duration (2160h), from a day to a century.
func (p *parser) retentionDuration(e entry, what string) (time.Duration, *Error) {
	const expected = "expected a duration like 90d or 2160h"
	if e.v.Kind == yaml.ScalarNode && e.v.Tag == tagInt {
		return 0, p.errf(e.v, "%s is a bare number %s (%s)", what, e.v.Value, expected)
	}
	s, err := p.str(e, what)
	if err != nil {
		return 0, err
	}
	d, ok := ParseDays(s)
	if !ok {
		return 0, p.errf(e.v, "bad duration %s for %s (%s)", quote(s), what, expected)
	}
	if d < 24*time.Hour || d > MaxRetention {
		return 0, p.errf(e.v, "%s is %s (expected from 1d to %dd; leave it out to keep settled effects for ever)", what, quote(s),
			MaxRetention/(24*time.Hour))
	}
	return d, nil
}

// MaxDays is the most days ParseDays reads: a century.
const MaxDays = 36500

// ParseDays reads a duration written as a whole number of days ("30d", at most MaxDays) or as a
// Go duration ("12h", "90m"): the form every latch duration that runs to days takes — retention,
// token expiry, console sessions, stats windows. ok is false when s is neither; bounds (such as
// "positive") are the caller's.
func ParseDays(s string) (d time.Duration, ok bool) {
	if n, isDays := strings.CutSuffix(s, "d"); isDays {
		days, err := strconv.ParseInt(n, 10, 64)
		if err != nil || days < 0 || days > MaxDays {
			return 0, false
		}
		return time.Duration(days) * 24 * time.Hour, true
	}
	d, err := time.ParseDuration(s)
	return d, err == nil
}

// normalizeRetention is the retention section's part of the policy hash.
func normalizeRetention(r *Retention) map[string]any {
	return map[string]any{"settled_effects": fmt.Sprintf("%ds", int64(r.SettledEffects/time.Second))}
}
