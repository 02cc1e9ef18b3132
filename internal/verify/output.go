package verify

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteText writes the report for a person: one aligned line per guarantee (id, title, status,
// the action used, and for a FAIL or an N/A the reason), the observations under each FAIL, then
// the summary: "N/M declared guarantees pass." followed by the failures and the guarantees that
// are not applicable, each with its reason.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	var wid, wtitle, wstatus int
	for _, res := range r.Results {
		wid = max(wid, len(res.ID))
		wtitle = max(wtitle, len(res.Title))
		wstatus = max(wstatus, len(res.Status))
	}
	for _, res := range r.Results {
		tail := res.Action
		switch {
		case res.Status == NotApplicable:
			tail = res.Reason
		case res.Status == Fail && tail != "":
			tail += ": " + res.Reason
		case res.Status == Fail:
			tail = res.Reason
		}
		line := fmt.Sprintf("%-*s  %-*s  %-*s  %s", wid, res.ID, wtitle, res.Title, wstatus, res.Status, tail)
		b.WriteString(strings.TrimRight(line, " ") + "\n")
		if res.Status == Fail && res.Detail != "" {
			fmt.Fprintf(&b, "%*s%s\n", wid+4, "", res.Detail)
		}
	}
	fmt.Fprintf(&b, "%d/%d declared guarantees pass.", r.Passed, r.Applicable)
	if r.Failed > 0 {
		fmt.Fprintf(&b, " %d failed: %s.", r.Failed, r.list(Fail))
	}
	if r.NotApplicable > 0 {
		fmt.Fprintf(&b, " %d not applicable: %s.", r.NotApplicable, r.list(NotApplicable))
	}
	if r.Applicable == 0 {
		b.WriteString(" Nothing this policy declares could be exercised.")
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// list renders "G8 (reason), G9 (reason)" for the results with status s.
func (r *Report) list(s Status) string {
	var parts []string
	for _, res := range r.Results {
		if res.Status == s {
			parts = append(parts, fmt.Sprintf("%s (%s)", res.ID, res.Reason))
		}
	}
	return strings.Join(parts, ", ")
}

// JSONSchema is the schema tag of the JSON report.
const JSONSchema = "latch.verify/v1"

type jsonReport struct {
	Schema        string       `json:"schema"`
	OK            bool         `json:"ok"`
	PolicyHash    string       `json:"policy_hash"`
	Backend       string       `json:"backend"`
	Passed        int          `json:"passed"`
	Failed        int          `json:"failed"`
	NotApplicable int          `json:"not_applicable"`
	Applicable    int          `json:"applicable"`
	Results       []jsonResult `json:"results"`
}

type jsonResult struct {
	ID         string  `json:"id"`
	Title      string  `json:"title"`
	Status     Status  `json:"status"`
	Action     string  `json:"action"`
	Reason     string  `json:"reason"`
	Detail     string  `json:"detail"`
	DurationMS float64 `json:"duration_ms"`
}

// WriteJSON writes the report as one JSON object on one line (the shape is in docs/verify.md).
func (r *Report) WriteJSON(w io.Writer) error {
	doc := jsonReport{
		Schema: JSONSchema, OK: r.OK(), PolicyHash: r.PolicyHash, Backend: r.Backend,
		Passed: r.Passed, Failed: r.Failed, NotApplicable: r.NotApplicable, Applicable: r.Applicable,
		Results: make([]jsonResult, 0, len(r.Results)),
	}
	for _, res := range r.Results {
		doc.Results = append(doc.Results, jsonResult{
			ID: res.ID, Title: res.Title, Status: res.Status, Action: res.Action, Reason: res.Reason,
			Detail: res.Detail, DurationMS: float64(res.Duration.Microseconds()) / 1000,
		})
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(doc)
}

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

// WriteJUnit writes the report as JUnit XML, which CI systems render: one testsuite "latch
// verify" with one testcase per guarantee, a <failure> for a FAIL and a <skipped> carrying the
// reason for an N/A.
func (r *Report) WriteJUnit(w io.Writer) error {
	var total time.Duration
	s := junitSuite{Name: "latch verify", Tests: len(r.Results), Failures: r.Failed, Skipped: r.NotApplicable}
	s.Properties = []junitProperty{{"policy_hash", r.PolicyHash}, {"backend", r.Backend}}
	for _, res := range r.Results {
		total += res.Duration
		c := junitCase{Name: res.ID + " " + res.Title, Classname: "latch.verify", Time: seconds(res.Duration)}
		out := res.Detail
		if res.Action != "" {
			out = "action: " + res.Action + "\n" + out
		}
		c.SystemOut = out
		switch res.Status {
		case Fail:
			c.Failure = &junitFailure{Message: res.Reason, Type: "guarantee_failed", Text: res.Detail}
		case NotApplicable:
			c.Skipped = &junitSkipped{Message: res.Reason}
		}
		s.Cases = append(s.Cases, c)
	}
	s.Time = seconds(total)
	doc := junitSuites{Name: "latch verify", Tests: s.Tests, Failures: s.Failures, Skipped: s.Skipped, Time: s.Time, Suites: []junitSuite{s}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }
