package cli_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/latchkit/latch/notify"
	"github.com/latchkit/latch/server"
)

const slackPolicy = `schema: latch.policy/v1
actions:
  billing.charge:
    effect: "charge:{invoice_id}"
    decision: approve
`

// TestServeSlack: `latch serve --notify URL --notify-format slack --slack-users FILE
// --slack-signing-secret-file FILE --slack-response-url PREFIX` posts an approval request to a
// fake Slack with Approve and Deny buttons, takes the signed click of a mapped user at POST
// /v1/slack/interactions, and posts the outcome to the click's response_url; the request is
// granted to the mapped approver. The flags' mistakes are refused before anything starts.
func TestServeSlack(t *testing.T) {
	t.Parallel()
	latchBin, policyPath := latchDir(t, slackPolicy)
	dir := filepath.Dir(policyPath)
	const secret = "s1gning-secret"
	secretFile, usersFile := filepath.Join(dir, "slack.key"), filepath.Join(dir, "slack-users")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(usersFile, []byte("# who answers from Slack\nU0ALICE alice\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyFile := filepath.Join(dir, "no-users")
	if err := os.WriteFile(emptyFile, []byte("# nobody yet\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var posts, outcomes []map[string]any
	fake := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &m); err != nil {
			t.Errorf("fake Slack: %s: %v", body, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/actions/") {
			outcomes = append(outcomes, m)
		} else {
			posts = append(posts, m)
		}
	}))
	defer fake.Close()
	wait := func(list *[]map[string]any) map[string]any {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			mu.Lock()
			if len(*list) > 0 {
				m := (*list)[0]
				mu.Unlock()
				return m
			}
			mu.Unlock()
		}
		t.Fatal("fake Slack: nothing posted")
		return nil
	}

	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"--slack-users", usersFile}, "needs the Slack app's signing secret"},
		{[]string{"--slack-signing-secret-file", secretFile}, "go with --slack-users FILE"},
		{[]string{"--slack-users", policyPath, "--slack-signing-secret-file", secretFile}, policyPath + ":1: Slack user id"},
		{[]string{"--slack-users", emptyFile, "--slack-signing-secret-file", secretFile}, "maps no Slack user"},
	} {
		cmd := exec.Command(latchBin, append([]string{"--policy", policyPath, "serve"}, bad.args...)...)
		cmd.Env = cleanEnv()
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), bad.want) {
			t.Errorf("serve %v = %v\n%s\nwant exit 2 saying %q", bad.args, err, out, bad.want)
		}
	}

	token := createToken(t, latchBin, nil, policyPath, "--agent", "billing-worker")
	p := startServe(t, latchBin, nil, "--policy", policyPath, "serve", "--notify", fake.URL+"/services/T0/B0/x", "--notify-format", "slack",
		"--slack-users", usersFile, "--slack-signing-secret-file", secretFile, "--slack-response-url", fake.URL+"/actions/")
	req, _ := http.NewRequest("POST", p.base+"/v1/actions", strings.NewReader(`{"action":"billing.charge","arguments":{"invoice_id":"inv_9"}}`))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var begun struct {
		ApprovalID string `json:"approval_id"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&begun)
	resp.Body.Close()
	if resp.StatusCode != 202 || begun.ApprovalID == "" {
		t.Fatalf("POST /v1/actions = %d %+v", resp.StatusCode, begun)
	}
	msg := wait(&posts)
	raw, _ := json.Marshal(msg)
	if !strings.Contains(string(raw), `"action_id":"latch_approve"`) || !strings.Contains(string(raw), `"value":"`+begun.ApprovalID+`"`) ||
		!strings.Contains(string(raw), "inv_9") {
		t.Fatalf("the Slack message = %s, want the arguments and an Approve button for %s", raw, begun.ApprovalID)
	}

	payload, _ := json.Marshal(map[string]any{"type": "block_actions", "user": map[string]any{"id": "U0ALICE"}, "team": map[string]any{"id": "T0"},
		"response_url": fake.URL + "/actions/T0/1/x",
		"actions":      []any{map[string]any{"action_id": notify.SlackActionApprove, "value": begun.ApprovalID}}})
	body := "payload=" + url.QueryEscape(string(payload))
	ts := time.Now().Unix()
	click, _ := http.NewRequest("POST", p.base+"/v1/slack/interactions", strings.NewReader(body))
	click.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	click.Header.Set(server.SlackHeaderTimestamp, strconv.FormatInt(ts, 10))
	click.Header.Set(server.SlackHeaderSignature, server.SlackSign([]byte(secret), ts, []byte(body)))
	cr, err := http.DefaultClient.Do(click)
	if err != nil {
		t.Fatal(err)
	}
	cr.Body.Close()
	if cr.StatusCode != 200 {
		t.Fatalf("the click = %d", cr.StatusCode)
	}
	out := wait(&outcomes)
	raw, _ = json.Marshal(out)
	if out["replace_original"] != true || !strings.Contains(string(raw), "granted by `slack:alice`") {
		t.Errorf("the outcome posted = %s, want the message replaced, granted by alice", raw)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("serve: %v\n%s", err, p.stderr)
	}
	if strings.Contains(p.stderr.String(), secret) {
		t.Errorf("serve logged the signing secret:\n%s", p.stderr)
	}
	approvals := runLatch(t, latchBin, nil, "--policy", policyPath, "approvals", "--json", "--status", "all")
	if !strings.Contains(string(approvals), `"status":"granted"`) || !strings.Contains(string(approvals), `"approver":"alice"`) ||
		!strings.Contains(string(approvals), `"method":"slack"`) {
		t.Errorf("latch approvals after the click:\n%s", approvals)
	}
}
