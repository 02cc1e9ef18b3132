package cli

import (
	"fmt"
	"github.com/latchkit/latch/auth"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/latchkit/latch/mcpop"
	"github.com/latchkit/latch/store"
)

// DefaultOperatorAddr is where `latch mcp-operator` listens unless --listen says otherwise.
const DefaultOperatorAddr = "127.0.0.1:7422"

type operatorFlags struct {
	stdio bool
	as    string
	http  httpFlags
	jwt   jwtFlags
	pub   checkpointPublicKey
}

func (a *app) mcpOperatorCommand() *cobra.Command {
	var of operatorFlags
	cmd := &cobra.Command{
		Use:   "mcp-operator [flags]",
		Short: "Serve the operator loop as MCP tools: approvals, effects, resolve, inspect, verify",
		Long: `Serve the operator's side of latch as an MCP server (docs/gateway.md#the-operator-mcp-server):
list_approvals, show_approval, approve, deny, list_effects, resolve, inspect,
list_receipts, stats and verify_receipts, answering in the shapes of the CLI's --json
and the HTTP API. The read tools are marked read-only. --checkpoint-pubkey FILE makes
verify_receipts check the signed checkpoints too.

Who answers is never a tool argument. Over streamable HTTP (the default, on 127.0.0.1:7422,
endpoint /mcp) it is the session's credential: an approver token of
'latch token create --approver NAME', or a person's JWT: one the --jwt-* flags verify that
carries the mark --jwt-approver-claim or --jwt-approver-audience sets (its sub, or
--jwt-approver-name-claim, names the person). An agent's credential, token or JWT, is
refused. With --stdio it is --as NAME, named by whoever starts the process and recorded as
unverified in each answer's note; without --as a stdio session can only read.`,
		Example: `  latch token create --approver alice
  latch mcp-operator
  latch mcp-operator --stdio --as alice`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runOperator(cmd.Flags(), &of)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&of.stdio, "stdio", false, "speak MCP on standard input and output instead of HTTP")
	f.StringVar(&of.as, "as", "", "with --stdio: who answers and resolves, recorded unverified (`NAME`)")
	of.http.register(f, DefaultOperatorAddr)
	of.jwt.register(f, "approvers'")
	of.pub.flags(f)
	return cmd
}

func (of *operatorFlags) check(f *pflag.FlagSet) error {
	if of.stdio {
		for _, name := range []string{"listen", "tls-cert", "tls-key", "behind-proxy"} {
			if f.Changed(name) {
				return usagef("--%s is for HTTP; --stdio serves standard input and output", name)
			}
		}
		if of.jwt.given() {
			return usagef("--jwt-* flags verify HTTP credentials; --stdio answers as --as")
		}
		if f.Changed("as") {
			if err := store.CheckApprover(of.as); err != nil {
				return usagef("--as: %v", err)
			}
		}
		return nil
	}
	if f.Changed("as") {
		return usagef("--as goes with --stdio; over HTTP the approver is each request's credential")
	}
	if err := of.http.check(); err != nil {
		return err
	}
	if err := of.jwt.check(); err != nil {
		return err
	}
	if of.jwt.given() && !of.jwt.people.marked() {
		return usagef("the operator tools are for people: with --jwt-issuer give --jwt-approver-claim CLAIM=VALUE or --jwt-approver-audience AUD, which mark a person's JWT; an unmarked JWT is an agent's and is refused")
	}
	return nil
}

func (a *app) runOperator(f *pflag.FlagSet, of *operatorFlags) error {
	if err := of.check(f); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(a.stderr, nil))
	g, _, err := a.openServer(log)
	if err != nil {
		return err
	}
	defer g.Close()
	pub, err := of.pub.read()
	if err != nil {
		return err
	}
	cfg := &mcpop.Config{Guard: g, Now: a.now, CheckpointKey: pub}
	if of.stdio {
		cfg.Approver = of.as
	}
	op, err := mcpop.New(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(a.ctx, syscall.SIGTERM, os.Interrupt)
	defer stop()
	if of.stdio {
		if of.as == "" {
			log.Warn("latch mcp-operator: no --as: this session can read but not answer or resolve")
		} else {
			log.Info("latch mcp-operator serving MCP on stdio", "approver", of.as, "verified", false)
		}
		return serveStdio(ctx, op.Server(), a.stdin, rawWriter(a.stdout))
	}
	ts, ok := g.Store().(store.TokenStore)
	if !ok {
		return fmt.Errorf("store %T keeps no API tokens: the HTTP operator authenticates approvers with them", g.Store())
	}
	idp, err := of.jwt.provider(ctx, log)
	if err != nil {
		return err
	}
	if !loopback(of.http.listen) {
		log.Warn(fmt.Sprintf("latch mcp-operator: listening on %s, beyond loopback", of.http.listen))
	}
	h := op.Handler(&auth.Authenticator{Tokens: ts, Identity: idp, Now: a.now})
	return serveHTTP(ctx, log, "latch mcp-operator", &of.http, h)
}
