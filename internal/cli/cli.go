// Package cli is the `latch` command: the operator's side of latch. It answers, one command at a
// time, what an on-call engineer needs when latch refuses something — who asked, for exactly
// what, what the human saw, what state the effect is in, whether the evidence is intact — and
// lets them act on it (approve, deny, resolve).
//
// The command is a function, Main, so that tests run the real thing against a temporary store;
// cmd/latch only wires it to the process. Exit codes are 0 (done), 1 (refused or failed, with a
// one-line reason on stderr) and 2 (usage error). Read commands (approvals, effects, receipts,
// inspect, stats, delegations) open the store read-only and never create or migrate it.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Exit codes of Main.
const (
	ExitOK      = 0 // done
	ExitRefused = 1 // refused or failed; one line on stderr says why
	ExitUsage   = 2 // unknown command or flag, bad argument
)

// observeBanner is printed to stderr first by every command that loads an observe-mode policy.
const observeBanner = "OBSERVE MODE — nothing is enforced"

// Main runs the latch command with args (without the program name) and returns the exit code.
// getenv reads the environment; it is never read directly. An empty value counts as unset, so
// a set-but-empty $LATCH_POLICY cannot be told apart through getenv: the binary uses MainLookup
// with os.LookupEnv, which can.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	return MainLookup(ctx, args, stdout, stderr, func(k string) (string, bool) {
		v := getenv(k)
		return v, v != ""
	})
}

// MainLookup is Main with an environment lookup that reports whether a variable is set
// (os.LookupEnv), so that a set-but-empty $LATCH_POLICY is refused as docs/policy.md requires.
func MainLookup(ctx context.Context, args []string, stdout, stderr io.Writer, lookup func(string) (string, bool)) int {
	// Human output reaches a terminal through the escaping writers (terminal.go); JSON output
	// goes past them (rawWriter).
	tout, terr := newTermWriter(stdout), newTermWriter(stderr)
	defer tout.flush()
	defer terr.flush()
	stdout, stderr = tout, terr
	a := &app{ctx: ctx, stdin: os.Stdin, stdout: stdout, stderr: stderr, lookup: lookup, now: time.Now}
	root := a.rootCommand()
	if args == nil {
		args = []string{} // nil makes cobra read os.Args
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	var cmd *cobra.Command
	err := unknownCommand(root, args)
	if err == nil {
		cmd, err = root.ExecuteContextC(ctx)
	}
	if err == nil {
		return ExitOK
	}
	name := "latch"
	if cmd != nil {
		name = cmd.CommandPath()
	}
	var ec *exitCoder
	if errors.As(err, &ec) {
		fmt.Fprintf(stderr, "%s: %s\n", name, oneLine(reason(err)))
		return ec.code
	}
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "%s: %s\n", name, oneLine(ue.msg))
		fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", name)
		return ExitUsage
	}
	fmt.Fprintf(stderr, "%s: %s\n", name, oneLine(reason(err)))
	return ExitRefused
}

// unknownCommand refuses a first argument that names no command before cobra runs: cobra would
// answer "latch frobnicate --help" with the root's help and exit 0, hiding the typo from a script.
func unknownCommand(root *cobra.Command, args []string) error {
	if len(args) > 0 && (args[0] == cobra.ShellCompRequestCmd || args[0] == cobra.ShellCompNoDescRequestCmd) {
		return nil // the hidden command a completion script asks what to complete with
	}
	root.InitDefaultHelpCmd()
	root.InitDefaultHelpFlag()
	cmd, rest, err := root.Find(args)
	if err != nil || cmd != root {
		return nil // a subcommand, or cobra's own error
	}
	if err := root.ParseFlags(rest); err != nil {
		return nil // cobra reports the flag error itself
	}
	if pos := root.Flags().Args(); len(pos) > 0 {
		return root.Args(root, pos)
	}
	return nil
}

// app is one invocation: its streams, environment and global flags.
type app struct {
	ctx            context.Context
	stdin          io.Reader // the MCP channel of --stdio servers, with stdout
	stdout, stderr io.Writer
	lookup         func(string) (string, bool)
	now            func() time.Time

	policyFlag string
	storeFlag  string
	flags      *pflag.FlagSet // the root's persistent flags, to tell "given" from "default"
}

// getenv returns the variable's value, "" when unset.
func (a *app) getenv(k string) string {
	v, _ := a.lookup(k)
	return v
}

// usageError is a usage mistake: exit 2 with a pointer to --help.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// reason is the message of err without the library's "latch: " prefixes, which the command
// name already says.
func reason(err error) string {
	s := err.Error()
	for strings.HasPrefix(s, "latch: ") {
		s = strings.TrimPrefix(s, "latch: ")
	}
	return s
}

// oneLine folds a message onto one line: the exit-1 contract is one line of reason.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "latch",
		Short: "The operator's side of latch: approvals, effects, receipts, delegations",
		Long: `latch is the last check between a decision to act and the call that acts.

This command is the operator's side: check and evaluate the policy, answer approval
requests, resolve ambiguous effects, and read and verify the receipt chain.

The operator loop:
  latch approvals            what waits for a human, with the exact arguments
  latch approve ID --as ME   (or deny)
  latch effects              what is ambiguous or stuck
  latch resolve KEY --committed|--failed --as ME
  latch receipts --verify    is the evidence intact?

Authority (a policy with an authority: section):
  latch delegate --parent ID --file GRANT.yaml --as AGENT[/USER]
  latch hop --parent ID --to AGENT[/USER] --file GRANT.yaml --as AGENT[/USER]
  latch delegations          who holds what, beneath which grant
  latch revoke ID --as ME    cuts it and everything beneath it

Exit codes: 0 done; 1 refused or failed (one line on stderr says why); 2 usage error.`,
		SilenceErrors:              true,
		SilenceUsage:               true,
		SuggestionsMinimumDistance: 2,
		CompletionOptions:          cobra.CompletionOptions{DisableDefaultCmd: true},
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			msg := fmt.Sprintf("unknown command %q", args[0])
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				msg += fmt.Sprintf(" (did you mean %q?)", s[0])
			}
			return &usageError{msg: msg}
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			cmd.SetOut(a.stderr)
			_ = cmd.Usage()
			return usagef("no command given")
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &usageError{msg: err.Error()}
	})
	pf := root.PersistentFlags()
	pf.StringVar(&a.policyFlag, "policy", "", "the policy `FILE` (default $LATCH_POLICY, else ./latch.yaml)")
	pf.StringVar(&a.storeFlag, "store", "", "the store `URL`: sqlite:PATH or postgres://… (default $LATCH_STORE, else .latch/state.db beside the policy)")
	a.flags = pf

	root.AddCommand(
		a.initCommand(),
		a.demoCommand(),
		a.checkCommand(),
		a.evalCommand(),
		a.policyCommand(),
		a.approvalsCommand(),
		a.answerCommand(true),
		a.answerCommand(false),
		a.effectsCommand(),
		a.resolveCommand(),
		a.receiptsCommand(),
		a.checkpointCommand(),
		a.pruneCommand(),
		a.holdCommand(),
		a.inspectCommand(),
		a.budgetsCommand(),
		a.statsCommand(),
		a.coverageCommand(),
		a.delegateCommand(),
		a.hopCommand(),
		a.revokeCommand(),
		a.revokeStandingCommand(),
		a.breakGlassCommand(),
		a.delegationsCommand(),
		a.verifyCommand(),
		a.versionCommand(),
		a.completionCommand(),
		a.benchCommand(),
		a.serveCommand(),
		a.tokenCommand(),
		a.gatewayCommand(),
		a.mcpOperatorCommand(),
		a.approverCommand(),
		a.scanCommand(),
	)
	for _, c := range root.Commands() {
		c.SilenceErrors, c.SilenceUsage = true, true
	}
	return root
}

// exactArgs returns a cobra argument check that reports a usage error naming the missing arguments.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) < len(names):
			return usagef("missing %s", strings.Join(names[len(args):], " "))
		case len(args) > len(names):
			return usagef("unexpected argument %q", args[len(names)])
		}
		for i, v := range args {
			if strings.TrimSpace(v) == "" {
				return usagef("%s is empty", names[i])
			}
		}
		return nil
	}
}

// noArgs refuses positional arguments.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q", args[0])
	}
	return nil
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// colour reports whether stdout gets colour: a terminal, $NO_COLOR unset, $TERM not dumb.
func (a *app) colour() bool {
	if a.getenv("NO_COLOR") != "" { // no-color.org: present and not empty
		return false
	}
	return a.getenv("TERM") != "dumb" && isTerminal(rawWriter(a.stdout))
}

// mark returns ✓ or ✗, green or red on a colour terminal.
func (a *app) mark(ok bool) string {
	m, code := "✗", "31"
	if ok {
		m, code = "✓", "32"
	}
	if a.colour() {
		return "\x1b[" + code + "m" + m + "\x1b[0m"
	}
	return m
}
