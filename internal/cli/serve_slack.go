package cli

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/latchkit/latch/server"
)

// slackFlags are latch serve's flags of Slack's interactivity endpoint (POST
// /v1/slack/interactions, docs/approvals.md#slack).
type slackFlags struct {
	secretFile   string
	usersFile    string
	team         string
	responseURLs []string
}

func (s *slackFlags) register(f *pflag.FlagSet) {
	f.StringVar(&s.usersFile, "slack-users", "", "take clicks on the Approve and Deny buttons of Slack approval messages at POST /v1/slack/interactions, as the approvers `FILE` maps Slack users to (one 'U0123ABCD name' a line); with --notify-format slack the messages get the buttons")
	f.StringVar(&s.secretFile, "slack-signing-secret-file", "", "read the Slack app's signing secret, which every click must be signed with, from `FILE` (else $LATCH_SLACK_SIGNING_SECRET)")
	f.StringVar(&s.team, "slack-team", "", "take clicks from this Slack workspace (team `ID`) only")
	f.StringArrayVar(&s.responseURLs, "slack-response-url", nil, "post the outcome of a click only to a response_url starting with `PREFIX` (repeatable; default "+server.DefaultSlackResponseURL+")")
}

// config is the server's Slack configuration, nil without --slack-users. The signing secret
// comes from a file or the environment, never the command line (which other users of the host
// can read).
func (s *slackFlags) config(getenv func(string) string) (*server.SlackConfig, error) {
	if s.usersFile == "" {
		if s.secretFile != "" || s.team != "" || len(s.responseURLs) > 0 {
			return nil, usagef("--slack-signing-secret-file, --slack-team and --slack-response-url go with --slack-users FILE")
		}
		return nil, nil
	}
	var secret []byte
	switch {
	case s.secretFile != "":
		b, err := readSecretFile("--slack-signing-secret-file", s.secretFile)
		if err != nil {
			return nil, err
		}
		secret = b
	case getenv("LATCH_SLACK_SIGNING_SECRET") != "":
		secret = []byte(getenv("LATCH_SLACK_SIGNING_SECRET"))
	default:
		return nil, usagef("--slack-users needs the Slack app's signing secret: --slack-signing-secret-file FILE or $LATCH_SLACK_SIGNING_SECRET")
	}
	raw, err := os.ReadFile(s.usersFile)
	if err != nil {
		return nil, fmt.Errorf("--slack-users: %w", err)
	}
	users, err := server.ParseSlackUsers(s.usersFile, raw)
	if err != nil {
		return nil, usagef("--slack-users: %s", err.Error())
	}
	if len(users) == 0 {
		return nil, usagef("--slack-users %s maps no Slack user to an approver: every click would be refused", s.usersFile)
	}
	return &server.SlackConfig{SigningSecret: secret, Users: users, Team: s.team, ResponseURLs: s.responseURLs}, nil
}
