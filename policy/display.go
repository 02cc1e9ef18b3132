package policy

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/currency"

	"github.com/latchkit/latch/canon"
)

// ArgumentView is one argument of a call as a person should read it: what `latch approvals`,
// `latch inspect` and every other approver surface show. Display hints are presentation only:
// they change neither the decision nor any hash.
type ArgumentView struct {
	Name  string // the argument's name
	Label string // the display label, "" when the policy gives none
	Raw   string // the value as canonical JSON, exactly as hashed; of a redacted argument, its masked form as a JSON string
	// Redacted says the policy redacts the argument: Raw is its masked form, never the value.
	Redacted bool
	Human    string // the value read through a display hint ("€2,500.00 (250000 minor units)"), "" when none applies
}

// View returns the arguments of a call to action as a person should read them: the arguments
// the action declares, in the policy's order, then any others sorted by name. An action the
// policy does not list (or a nil policy) gives the raw values only.
func (p *Policy) View(action string, args map[string]any) []ArgumentView {
	var a *Action
	if p != nil {
		a = p.Actions[action]
	}
	return a.View(args)
}

// View is [Policy.View] for one action; a nil action gives the raw values only.
func (a *Action) View(args map[string]any) []ArgumentView {
	var out []ArgumentView
	done := map[string]bool{}
	if a != nil {
		for _, d := range a.Arguments {
			v, ok := args[d.Name]
			if !ok {
				continue
			}
			done[d.Name] = true
			out = append(out, d.view(v, args))
		}
	}
	rest := make([]string, 0, len(args))
	for k := range args {
		if !done[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	for _, k := range rest {
		out = append(out, ArgumentView{Name: k, Raw: rawJSON(args[k])})
	}
	return out
}

func (d *Argument) view(v any, args map[string]any) ArgumentView {
	if d.Redact != RedactNone {
		av := ArgumentView{Name: d.Name, Raw: rawJSON(d.Redact.Mask(v)), Redacted: true}
		if d.Display != nil {
			av.Label = d.Display.Label
		}
		return av
	}
	av := ArgumentView{Name: d.Name, Raw: rawJSON(v)}
	if d.Display == nil {
		return av
	}
	av.Label = d.Display.Label
	if m := d.Display.Money; m != nil {
		if n, ok := v.(int64); ok {
			code, units, why := m.Currency, m.MinorUnits, ""
			if m.CurrencyArg != "" {
				c, ok := args[m.CurrencyArg].(string)
				e, known := MinorUnits(c)
				switch {
				case !ok:
					code, why = "", "no currency in "+quote(m.CurrencyArg)
				case !known:
					code, why = "", "currency "+quote(c)+" is not an ISO 4217 code"
				default:
					// The currency's own exponent: minor_units was written without knowing it.
					code, units = c, e
				}
			}
			av.Human = FormatMoney(n, units, code)
			if why != "" {
				av.Human = strings.TrimSuffix(av.Human, ")") + "; " + why + ")"
			}
		}
	}
	return av
}

// String renders the view on one line: `amount (Refund) = 250000 — €2,500.00 (250000 minor units)`.
func (v ArgumentView) String() string {
	s := v.Name
	if v.Label != "" {
		s += " (" + v.Label + ")"
	}
	s += " = " + v.Raw
	if v.Human != "" {
		s += " — " + v.Human
	}
	return s
}

// FormatMoney renders an integer amount of minor units as money, exactly (no floating point):
// FormatMoney(250000, 2, "EUR") is "€2,500.00 (250000 minor units)". The symbol is the
// currency's unambiguous one (US$, CA$, €, £); an empty or unknown code shows the number alone.
func FormatMoney(amount int64, minorUnits int, code string) string {
	if minorUnits < 0 || minorUnits > maxMinorUnits {
		minorUnits = 0
	}
	neg := amount < 0
	abs := uint64(amount)
	if neg {
		abs = uint64(-(amount + 1)) + 1 // no overflow at math.MinInt64
	}
	pow := uint64(1)
	for range minorUnits {
		pow *= 10
	}
	whole, frac := abs/pow, abs%pow
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	sym := ""
	if code != "" && knownCurrency(code) {
		sym = fmt.Sprint(currency.Symbol(currency.MustParseISO(code)))
	}
	b.WriteString(sym)
	if r, _ := utf8.DecodeLastRuneInString(sym); sym != "" && unicode.IsLetter(r) {
		b.WriteByte(' ')
	}
	digits := strconv.FormatUint(whole, 10)
	for i, c := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if minorUnits > 0 {
		f := strconv.FormatUint(frac, 10)
		b.WriteByte('.')
		b.WriteString(strings.Repeat("0", minorUnits-len(f)))
		b.WriteString(f)
	}
	fmt.Fprintf(&b, " (%d minor units)", amount)
	return b.String()
}

// knownCurrency reports whether s is an ISO 4217 code: three capital letters that the currency
// tables know.
func knownCurrency(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if s[i] < 'A' || s[i] > 'Z' {
			return false
		}
	}
	_, err := currency.ParseISO(s)
	return err == nil
}

// rawJSON is v as canonical JSON, or a note when v is not a latch value.
func rawJSON(v any) string {
	b, err := canon.Marshal(v)
	if err != nil {
		return fmt.Sprintf("(%s)", kindPhrase(v))
	}
	return string(b)
}
