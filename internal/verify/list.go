package verify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Entry is one guarantee of the catalogue as List describes it for a policy.
type Entry struct {
	ID         string // G1, L1…
	Title      string // "duplicate effect refused"
	Numbering  string // NumberingShared or NumberingLatch
	Applicable bool   // the policy gives the scenario what it needs
	Reason     string // why it is not applicable; "" when it is
}

// Numberings of an Entry: the G ids carry the reference catalogue's number for a meaning latch
// shares with it; the L ids are latch's own.
const (
	NumberingShared = "shared"
	NumberingLatch  = "latch"
)

// Catalogue is the outcome of List: every guarantee, in catalogue order, with its applicability
// to one policy.
type Catalogue struct {
	Entries       []Entry
	Applicable    int
	NotApplicable int
	PolicyHash    string
}

// List describes the catalogue for cfg.Policy without running anything: each guarantee with
// whether the policy can exercise it and, when it cannot, why (the reason Run would give for
// N/A). Only Policy, Only, LatchHTTP, Now and the scheme of StoreURL (G13 needs a backend with
// a clock of its own) of cfg are read; no store is opened, no scratch store created, no process
// started. Each scenario runs until its first scratch environment,
// by which point it has decided applicability; Run refuses a scenario that finds N/A later, so
// the two cannot disagree.
func List(ctx context.Context, cfg *Config) (*Catalogue, error) {
	c, selected, err := checkConfig(cfg)
	if err != nil {
		return nil, err
	}
	r, err := newRunner(&c, faultSet{}, nil)
	if err != nil {
		return nil, err
	}
	defer r.close()
	r.dry = true
	cat := &Catalogue{PolicyHash: c.Policy.Hash}
	for _, g := range catalogue {
		if !selected[g.id] {
			continue
		}
		o, err := g.run(r, ctx)
		e := Entry{ID: g.id, Title: g.title, Numbering: numbering(g.id)}
		switch {
		case errors.Is(err, errDry):
			e.Applicable = true
			cat.Applicable++
		case err != nil:
			return nil, fmt.Errorf("verify %s: %w", g.id, err)
		case o.status == NotApplicable:
			e.Reason = o.reason
			cat.NotApplicable++
		default:
			// A scenario decides applicability before its first scratch environment; one that
			// reached a verdict without one broke that rule.
			return nil, fmt.Errorf("verify %s: reached %s without a scratch store", g.id, o.status)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		cat.Entries = append(cat.Entries, e)
	}
	return cat, nil
}

func numbering(id string) string {
	if strings.HasPrefix(id, "L") {
		return NumberingLatch
	}
	return NumberingShared
}

// WriteText writes the catalogue for a person: one aligned line per guarantee (id, title,
// "applicable" or "N/A" and the reason), then a summary line.
func (c *Catalogue) WriteText(w io.Writer) error {
	var b strings.Builder
	var wid, wtitle int
	for _, e := range c.Entries {
		wid = max(wid, len(e.ID))
		wtitle = max(wtitle, len(e.Title))
	}
	for _, e := range c.Entries {
		status := "applicable"
		if !e.Applicable {
			status = "N/A"
		}
		line := fmt.Sprintf("%-*s  %-*s  %-10s  %s", wid, e.ID, wtitle, e.Title, status, e.Reason)
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	fmt.Fprintf(&b, "%d guarantees: %d applicable to this policy, %d not applicable.\n",
		len(c.Entries), c.Applicable, c.NotApplicable)
	_, err := io.WriteString(w, b.String())
	return err
}

// ListSchema is the schema tag of the JSON catalogue.
const ListSchema = "latch.verify.list/v1"

type jsonCatalogue struct {
	Schema        string      `json:"schema"`
	PolicyHash    string      `json:"policy_hash"`
	Applicable    int         `json:"applicable"`
	NotApplicable int         `json:"not_applicable"`
	Guarantees    []jsonEntry `json:"guarantees"`
}

type jsonEntry struct {
	ID         string `json:"id"`
	Title      string `json:"title"`
	Numbering  string `json:"numbering"`
	Applicable bool   `json:"applicable"`
	Reason     string `json:"reason"`
}

// WriteJSON writes the catalogue as one JSON object on one line (the shape is in docs/verify.md).
func (c *Catalogue) WriteJSON(w io.Writer) error {
	doc := jsonCatalogue{Schema: ListSchema, PolicyHash: c.PolicyHash, Applicable: c.Applicable,
		NotApplicable: c.NotApplicable, Guarantees: make([]jsonEntry, 0, len(c.Entries))}
	for _, e := range c.Entries {
		doc.Guarantees = append(doc.Guarantees, jsonEntry(e)) // the same fields, with their JSON names
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(doc)
}
