package cli

import (
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/latchkit/latch/gateway"
)

// gatewayPinCommand is `latch gateway pin`: what to pin, and what changed since the pins.
func (a *app) gatewayPinCommand() *cobra.Command {
	var diff bool
	cmd := &cobra.Command{
		Use:   "pin [--diff]",
		Short: "Print the pins of the upstreams' tools as they are now, or what changed since (docs/gateway.md#pinning)",
		Long: `Connect to every upstream of the policy's gateway: section, list its tools and print the
pin of each (the SHA-256 of its canonical tools/list entry) as YAML ready to paste under
gateway.upstreams; an upstream's tls_cert_sha256 pins are kept as the policy has them.

With --diff, print per tool whether it matches its pin, differs from it (pinned beside
observed), is listed but not pinned, or is pinned but no longer listed. Review a change before
re-pinning it: a redefined tool is refused upstream_mismatch until its pin is updated.`,
		Example: `  latch gateway pin --policy latch.yaml
  latch gateway pin --diff`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewTextHandler(a.stderr, nil))
			g, path, err := a.openServer(log)
			if err != nil {
				return err
			}
			defer g.Close()
			rows, err := gateway.Observe(a.ctx, &gateway.Config{Guard: g, Dir: filepath.Dir(path), Stderr: rawWriter(a.stderr), Logger: log})
			if err != nil {
				return err
			}
			if diff {
				printPinDiff(a.stdout, rows)
				return nil
			}
			printPins(a.stdout, rows, func(alias string) []string {
				if u := g.Policy().Gateway.Upstreams[alias]; u != nil && u.Pin != nil {
					return u.Pin.TLSCertSHA256
				}
				return nil
			})
			return nil
		},
	}
	cmd.Flags().BoolVar(&diff, "diff", false, "show, per tool, the pinned hash beside the observed one")
	return cmd
}

// printPins prints the gateway section's pins of the observed tools as YAML.
func printPins(w io.Writer, rows []gateway.ToolPin, certs func(alias string) []string) {
	fmt.Fprintln(w, "gateway:\n  upstreams:")
	last := ""
	for _, r := range rows {
		if r.Observed == "" {
			continue // pinned but not listed: nothing to pin
		}
		if r.Upstream != last {
			last = r.Upstream
			fmt.Fprintf(w, "    %s:\n      pin:\n", r.Upstream)
			if cs := certs(r.Upstream); len(cs) > 0 {
				fmt.Fprintln(w, "        tls_cert_sha256:")
				for _, c := range cs {
					fmt.Fprintf(w, "          - %q\n", c)
				}
			}
			fmt.Fprintln(w, "        tool_schema_sha256:")
		}
		fmt.Fprintf(w, "          %s: %q\n", r.Tool, r.Observed)
	}
}

// printPinDiff prints each tool's pin beside what the upstream lists now.
func printPinDiff(w io.Writer, rows []gateway.ToolPin) {
	for _, r := range rows {
		name := r.Upstream + "." + r.Tool
		switch {
		case r.Matches():
			fmt.Fprintf(w, "= %s  unchanged %s\n", name, r.Pinned)
		case r.Pinned == "":
			fmt.Fprintf(w, "+ %s  not pinned; observed %s\n", name, r.Observed)
		case r.Observed == "":
			fmt.Fprintf(w, "- %s  pinned %s; no longer listed\n", name, r.Pinned)
		default:
			fmt.Fprintf(w, "! %s  changed: pinned %s, observed %s\n", name, r.Pinned, r.Observed)
		}
	}
}
