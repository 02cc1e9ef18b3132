package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/internal/safetext"
	"github.com/latchkit/latch/notify"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/server/console"
	"github.com/latchkit/latch/store"
)

func (a *app) breakGlassCommand() *cobra.Command {
	var envelope, reason, ttlText, as, forText, file string
	var notifyURLs []string
	var notifyFormat, notifySecretFile string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "break-glass --envelope ID --reason TEXT [--ttl DURATION] [--as ACCOUNT] [flags]",
		Short: "Open a break-glass grant: an emergency grant inside one of the policy's envelopes",
		Long: `Open a break-glass grant (docs/authority.md): a recorded, expiring, revocable grant
inside one of the envelopes of the policy's authority.break_glass, for an emergency.

Only a person opens one, verified with the password of their local approver account
(latch approver add): --as ACCOUNT (default $LATCH_APPROVER, else $USER), the password
read from standard input (prompted without echo on a terminal). When the envelope names
openers, the account must be a member of one of those roles.

The grant is the envelope's own shape, or the narrower grant --file gives (the keys of a
grant, without id and expires_at), for the one agent --for names (AGENT[/USER]; needed
when the envelope's agent is a pattern). It lasts --ttl (at most the envelope's max_ttl,
which is the default) and is never delegable. --reason says why; it is kept with the
grant, its event and its record.

Calls under it carry the envelope in their receipt (authority.break_glass). latch revoke
ends it early; latch delegations lists it, its parent marked (break-glass). A refusal
exits 1 naming the reason and the dimension, and writes no grant.

--notify URL posts the break_glass_opened alert from this command, signed as latch serve
--notify signs its alerts (the same --notify-format and --notify-secret-file): latch serve
alerts on the openings it makes itself (the API, the console), not on this command's.
An alert that cannot be delivered is reported on standard error; the grant stays open.`,
		Example: "  latch break-glass --envelope payments-incident --for ops-bot --ttl 1h --reason 'INC-42: refunds stuck' --as carol",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case strings.TrimSpace(envelope) == "":
				return usagef("missing --envelope ID (an envelope of the policy's authority.break_glass)")
			case strings.TrimSpace(reason) == "":
				return usagef("missing --reason TEXT (why the emergency needs it: it is kept with the grant)")
			}
			var ttl time.Duration
			if ttlText != "" {
				d, ok := policy.ParseDays(ttlText)
				if !ok || d <= 0 {
					return usagef("--ttl %q: want a positive duration such as 30m or 2h", ttlText)
				}
				ttl = d
			}
			var whom latch.Principal
			if forText != "" {
				p, err := parseFor(forText)
				if err != nil {
					return err
				}
				whom = p
			}
			var doc []byte
			if file != "" {
				b, err := os.ReadFile(file)
				if err != nil {
					return fmt.Errorf("read %s: %w", file, unwrapPath(err))
				}
				if _, _, err := policy.BreakGlassGrant(file, b, policy.Subject{}, a.now()); err != nil {
					return err // file:line:column: what is wrong (an expires_at of its own included)
				}
				doc = b
			}
			name, err := a.operator(as, cmd.Flags().Changed("as"))
			if err != nil {
				return err
			}
			var sinks []latch.Sink
			var n *notify.Notifier
			if len(notifyURLs) > 0 {
				if n, err = a.notifier(notifyURLs, notifyFormat, notifySecretFile, 0, false, nil, slog.New(slog.NewTextHandler(a.stderr, nil))); err != nil {
					return err
				}
				sinks = []latch.Sink{n}
			} else if notifyFormat != notify.FormatJSON || notifySecretFile != "" {
				return usagef("--notify-format and --notify-secret-file go with --notify URL")
			}
			g, err := a.openGuardWith(false, sinks)
			if err != nil {
				if n != nil {
					n.Close()
				}
				return err
			}
			defer g.Close()
			if n != nil {
				// Closed before the guard: the alert is delivered (or given up on) before the
				// command exits.
				defer func() {
					if err := n.Close(); err != nil {
						fmt.Fprintf(a.stderr, "latch break-glass: the alert: %v\n", err)
					}
				}()
			}
			person, err := a.verifyAccount(g.Store(), name)
			if err != nil {
				return err
			}
			d, err := g.BreakGlass(a.ctx, &latch.BreakGlassRequest{Envelope: envelope, Grant: doc, For: whom, TTL: ttl,
				Reason: reason, By: person})
			if err != nil {
				var pe *policy.Error
				if errors.As(err, &pe) {
					return err
				}
				return delegateError(envelope, err)
			}
			j := newDelegationJSON(d, nil)
			if asJSON {
				return jsonLine(a.stdout, j)
			}
			fmt.Fprintf(a.stdout, "opened break-glass %s in %s for %s, by %s, until %s\n", d.ID, d.Parent,
				principal(deref(j.Subject.Agent), deref(j.Subject.User)), d.CreatedBy, dash(deref(j.ExpiresAt)))
			t := newTable(a.stdout)
			t.row("  reason", safetext.Quote(d.Reason))
			grantRows(t, j)
			if err := t.flush(); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "end it early with: latch revoke %s\n", d.ID)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&envelope, "envelope", "", "the envelope `ID` to open, from the policy's authority.break_glass")
	f.StringVar(&reason, "reason", "", "why: `TEXT` kept with the grant, its event and its record")
	f.StringVar(&ttlText, "ttl", "", "how long the grant lasts (`DURATION`: 30m, 2h); default and at most the envelope's max_ttl")
	f.StringVar(&as, "as", "", "the local approver `ACCOUNT` opening it, verified with its password from standard input (default $LATCH_APPROVER, else $USER)")
	f.StringVar(&forText, "for", "", "whom the grant is for: `AGENT[/USER]`, replacing the envelope's (or the file's) subject")
	f.StringVar(&file, "file", "", "a narrower grant to open, a YAML `FILE` with the keys of a grant (no id, no expires_at)")
	f.BoolVar(&asJSON, "json", false, "print the grant as one JSON object (the shape of latch delegations --json)")
	f.StringArrayVar(&notifyURLs, "notify", nil, "post the signed break_glass_opened alert to `URL` (repeatable)")
	f.StringVar(&notifyFormat, "notify-format", notify.FormatJSON, "the alert body: json (signed) or slack")
	f.StringVar(&notifySecretFile, "notify-secret-file", "", "read the alert's HMAC-SHA256 key from `FILE` (else $LATCH_NOTIFY_SECRET)")
	return cmd
}

// parseFor reads --for AGENT[/USER]: whom a break-glass grant is for.
func parseFor(s string) (latch.Principal, error) {
	agent, user, hasUser := strings.Cut(s, "/")
	switch {
	case agent == "":
		return latch.Principal{}, usagef("--for %q: the agent is missing (want AGENT[/USER])", s)
	case hasUser && user == "":
		return latch.Principal{}, usagef("--for %q: the user after / is empty (want AGENT[/USER])", s)
	case strings.Contains(user, "/"):
		return latch.Principal{}, usagef("--for %q: at most one / (want AGENT[/USER])", s)
	}
	return latch.Principal{Agent: agent, User: user}, nil
}

// verifyAccount checks the password of the local approver account name, read from standard
// input, and returns the person it verifies. A missing account and a wrong password are refused
// alike, writing nothing.
func (a *app) verifyAccount(st store.Store, name string) (store.Approver, error) {
	as, ok := st.(store.AccountStore)
	if !ok {
		return store.Approver{}, fmt.Errorf("store %T keeps no approver accounts", st)
	}
	password, err := a.readSecret(a.stdin, name)
	if err != nil {
		return store.Approver{}, err
	}
	acc, err := as.Account(a.ctx, name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Approver{}, fmt.Errorf("refused: no approver account %s (latch approver add %s creates one)", safetext.Quote(name), safetext.Quote(name))
	case err != nil:
		return store.Approver{}, fmt.Errorf("read approver account %s: %w", safetext.Quote(name), err)
	}
	if err := console.CheckPassword(acc.PasswordHash, password); err != nil {
		if errors.Is(err, console.ErrWrongPassword) {
			return store.Approver{}, fmt.Errorf("refused: wrong password for approver account %s", safetext.Quote(acc.Name))
		}
		return store.Approver{}, fmt.Errorf("check the password of %s: %w", safetext.Quote(acc.Name), err)
	}
	return store.Approver{Name: acc.Name, Method: store.MethodPassword, Verified: true}, nil
}

// readSecret reads one password: prompted once without echo on a terminal, else the first line
// of in.
func (a *app) readSecret(in io.Reader, name string) (string, error) {
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprintf(a.stderr, "password of approver account %s: ", name)
		p, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(a.stderr)
		if err != nil {
			return "", fmt.Errorf("read password: %w", err)
		}
		return string(p), nil
	}
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return "", fmt.Errorf("read password: %w", err)
	}
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	if line == "" {
		return "", errors.New("no password on standard input (the approver account's password verifies who opens a break-glass grant)")
	}
	return line, nil
}
