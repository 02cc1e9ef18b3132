package cli

import (
	"errors"
	"fmt"
	"go/token"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/latchkit/latch/internal/scanrun"
	"github.com/latchkit/latch/scan"
)

// scanJSON is what `latch scan --json` prints.
type scanJSON struct {
	Config      string          `json:"config"`
	Packages    int             `json:"packages"`
	Unprotected int             `json:"unprotected"`
	Diagnostics []scanDiagJSON  `json:"diagnostics"`
	Allows      []scanAllowJSON `json:"allows"`
}

type scanPosJSON struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	Column int    `json:"column"`
}

type scanDiagJSON struct {
	scanPosJSON
	End      scanPosJSON `json:"end"`
	Category string      `json:"category"` // unprotected, allow
	Message  string      `json:"message"`
}

type scanAllowJSON struct {
	scanPosJSON
	Reason string      `json:"reason"`
	Callee string      `json:"callee"`
	Call   scanPosJSON `json:"call"`
}

func (a *app) scanCommand() *cobra.Command {
	var asJSON, tests bool
	var configFile, dir string
	cmd := &cobra.Command{
		Use:   "scan [packages]",
		Short: "Find calls of consequential APIs that are not reached through latch",
		Long: `Load the Go packages (default ./...) and report every call of a consequential API — listed
in the scan configuration, latch.scan.yaml — that does not run under latch: not inside a
function given to latch.Protect, Guard.Execute or an integration wrapper, nor after a checked
Guard.Begin. A //latch:allow <reason> comment on the call's line, or alone on the line
above it, suppresses the report; every allow is listed in a summary with its reason.

The configuration is --config, else the latch.scan.yaml found from the directory up to the
module root. The same analyzer runs as a vet tool (cmd/latch-vet) and a golangci-lint plugin.

Exit codes: 0 nothing to report; 1 an unprotected call, an allow without a reason or one that
allows nothing (or the packages or configuration could not be loaded); 2 bad usage.
See docs/scan.md.`,
		Example: "  latch scan\n  latch scan ./billing/... --json\n  latch scan --config ci/latch.scan.yaml --tests ./...",
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.scan(args, configFile, dir, tests, asJSON)
		},
	}
	f := cmd.Flags()
	f.StringVar(&configFile, "config", "", "the scan configuration `FILE` (default: "+scan.ConfigFile+" found from --dir up to the module root)")
	f.StringVar(&dir, "dir", "", "the `DIR` to load packages from (default: the working directory)")
	f.BoolVar(&tests, "tests", false, "scan test files too")
	f.BoolVar(&asJSON, "json", false, "print one JSON document")
	return cmd
}

func (a *app) scan(patterns []string, configFile, dir string, tests, asJSON bool) error {
	for _, p := range patterns {
		if strings.TrimSpace(p) == "" {
			return usagef("a package pattern is empty")
		}
	}
	base := dir
	if base == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("scan: %w", err)
		}
		base = wd
	}
	if configFile == "" {
		found, err := scan.FindConfig(base)
		if err != nil {
			return err
		}
		configFile = found
	}
	cfg, err := scan.LoadConfig(configFile)
	if err != nil {
		var ce *scan.ConfigError
		if errors.As(err, &ce) {
			ce.File = relTo(base, ce.File)
		}
		return err
	}
	rep, err := scanrun.Run(a.ctx, &scanrun.Options{Config: cfg, Dir: dir, Patterns: patterns, Tests: tests})
	if err != nil {
		return err
	}
	if asJSON {
		err = jsonLine(a.stdout, scanView(base, configFile, rep))
	} else {
		err = a.scanText(base, rep)
	}
	if err != nil {
		return err
	}
	if n := len(rep.Diagnostics); n > 0 {
		return &exitCoder{code: ExitRefused, err: fmt.Errorf("%d unprotected call(s), %d allow problem(s)", rep.Unprotected(), n-rep.Unprotected())}
	}
	return nil
}

func (a *app) scanText(base string, rep *scanrun.Report) error {
	w := a.stdout
	for _, d := range rep.Diagnostics {
		fmt.Fprintf(w, "%s: %s\n", posString(base, d.Pos), d.Message)
	}
	if len(rep.Allows) > 0 {
		fmt.Fprintf(w, "allowed (%d):\n", len(rep.Allows))
		for _, al := range rep.Allows {
			fmt.Fprintf(w, "  %s: %s at %s: %s\n", posString(base, al.Pos), al.Callee, posString(base, al.Call), al.Reason)
		}
	}
	_, err := fmt.Fprintf(w, "scanned %d package(s): %d unprotected call(s), %d allowed\n", rep.Packages, rep.Unprotected(), len(rep.Allows))
	return err
}

func scanView(base, configFile string, rep *scanrun.Report) scanJSON {
	v := scanJSON{
		Config: relTo(base, configFile), Packages: rep.Packages, Unprotected: rep.Unprotected(),
		Diagnostics: []scanDiagJSON{}, Allows: []scanAllowJSON{},
	}
	for _, d := range rep.Diagnostics {
		v.Diagnostics = append(v.Diagnostics, scanDiagJSON{
			scanPosJSON: posJSON(base, d.Pos), End: posJSON(base, d.End), Category: d.Category, Message: d.Message,
		})
	}
	for _, al := range rep.Allows {
		v.Allows = append(v.Allows, scanAllowJSON{
			scanPosJSON: posJSON(base, al.Pos), Reason: al.Reason, Callee: al.Callee, Call: posJSON(base, al.Call),
		})
	}
	return v
}

func posJSON(base string, p token.Position) scanPosJSON {
	return scanPosJSON{File: relTo(base, p.Filename), Line: p.Line, Column: p.Column}
}

func posString(base string, p token.Position) string {
	return fmt.Sprintf("%s:%d:%d", relTo(base, p.Filename), p.Line, p.Column)
}

// relTo is file relative to base when it lies under it, else as it is.
func relTo(base, file string) string {
	if !filepath.IsAbs(file) {
		return file
	}
	rel, err := filepath.Rel(base, file)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return file
	}
	return rel
}
