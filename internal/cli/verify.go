package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/latchkit/latch/internal/verify"
)

// exitCoder carries an exit code other than the usual 0/1/2 (latch verify's 3).
type exitCoder struct {
	code int
	err  error
}

func (e *exitCoder) Error() string { return e.err.Error() }
func (e *exitCoder) Unwrap() error { return e.err }

func (a *app) verifyCommand() *cobra.Command {
	var asJSON, list, withHTTP bool
	var junit, badge, only string
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Run the guarantee catalogue (G1–G32, L1–L6) against this policy in a scratch store",
		Long: `Run latch's own failure scenarios against this policy, in a scratch store of the same
backend as the configured one (the configured store is never opened), with fake executors,
an injected clock and no network. Each guarantee has a positive control; a guarantee the
policy cannot exercise is N/A with the reason, and N/A is never counted as a pass.

Exit codes: 0 every applicable guarantee passes; 1 one fails; 2 nothing applicable or bad
usage (an observe-mode policy is refused: verify grades enforcement); 3 internal error.

--junit FILE also writes a JUnit XML report; --badge FILE an SVG badge, "latch verify:
N/M" (the guarantees that pass of those applicable), green when every one passes and red
when any fails, written whether the run passes or fails.

--list prints the catalogue instead, with whether this policy can exercise each guarantee and,
when it cannot, why; it runs nothing and exits 0.
See docs/verify.md.`,
		Example: "  latch verify\n  latch verify --list\n  latch verify --only G1,L3 --json\n  latch verify --junit verify.xml\n  latch verify --badge latch-verify.svg",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p, err := a.loadPolicy()
			if err != nil {
				return err
			}
			url, err := a.storeURL()
			if err != nil {
				return err
			}
			cfg := &verify.Config{Policy: p, StoreURL: url, LatchHTTP: withHTTP}
			if only != "" {
				cfg.Only = strings.Split(only, ",")
			}
			if list {
				if junit != "" || badge != "" {
					return usagef("--list runs nothing: give it without --junit or --badge")
				}
				return a.verifyList(cfg, asJSON)
			}
			rep, err := verify.Run(a.ctx, cfg)
			code := verify.ExitCode(rep, err)
			if err != nil {
				var ue *verify.UsageError
				if errors.As(err, &ue) {
					return usagef("%s", err)
				}
				return &exitCoder{code: code, err: err}
			}
			if asJSON {
				err = rep.WriteJSON(a.stdout)
			} else {
				err = rep.WriteText(a.stdout)
			}
			if err != nil {
				return &exitCoder{code: verify.ExitInternal, err: err}
			}
			if junit != "" {
				if err := writeFile(junit, rep.WriteJUnit); err != nil {
					return &exitCoder{code: verify.ExitInternal, err: err}
				}
			}
			if badge != "" {
				if err := writeFile(badge, rep.WriteBadge); err != nil {
					return &exitCoder{code: verify.ExitInternal, err: err}
				}
			}
			switch code {
			case verify.ExitPass:
				return nil
			case verify.ExitUsage:
				return &exitCoder{code: code, err: errors.New("no guarantee is applicable to this policy")}
			}
			return &exitCoder{code: code, err: fmt.Errorf("%d of %d applicable guarantees failed", rep.Failed, rep.Applicable)}
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON report")
	cmd.Flags().StringVar(&junit, "junit", "", "also write a JUnit XML report to `FILE`")
	cmd.Flags().StringVar(&badge, "badge", "", "also write an SVG badge, \"latch verify: N/M\" (red when any guarantee fails), to `FILE`")
	cmd.Flags().StringVar(&only, "only", "", "run only these guarantees, e.g. `G1,L3`")
	cmd.Flags().BoolVar(&withHTTP, "latchhttp", false, "your executors call their remotes through latchhttp: exercise its classification (G12)")
	cmd.Flags().BoolVar(&list, "list", false, "print the catalogue with each guarantee's applicability to this policy; run nothing")
	return cmd
}

// writeFile creates path and writes it with write.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, unwrapPath(err))
	}
	werr := write(f)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("write %s: %w", path, werr)
	}
	return nil
}

// verifyList serves latch verify --list.
func (a *app) verifyList(cfg *verify.Config, asJSON bool) error {
	cat, err := verify.List(a.ctx, cfg)
	if err != nil {
		var ue *verify.UsageError
		if errors.As(err, &ue) {
			return usagef("%s", err)
		}
		return &exitCoder{code: verify.ExitInternal, err: err}
	}
	if asJSON {
		err = cat.WriteJSON(a.stdout)
	} else {
		err = cat.WriteText(a.stdout)
	}
	if err != nil {
		return &exitCoder{code: verify.ExitInternal, err: err}
	}
	return nil
}
