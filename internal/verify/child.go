package verify

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
)

// childEnv names the environment variable that makes a re-executed binary a G4 racer. Its value
// is the JSON of a childSpec.
const childEnv = "LATCH_VERIFY_CHILD"

// racers is how many OS processes race in G4.
const racers = 8

// raceTimeout bounds one race, from the first start to the last exit.
const raceTimeout = 2 * time.Minute

// execMarker prefixes the marker file an executing racer creates (O_CREATE|O_EXCL): the markers
// count executions, whatever the store says.
const execMarker = "exec-"

// childSpec is what one racer is told.
type childSpec struct {
	Role       string          `json:"role"`
	URL        string          `json:"url"`         // the scratch store
	PolicyFile string          `json:"policy_file"` // the scenario policy
	Action     string          `json:"action"`
	Args       json.RawMessage `json:"args"`
	Resource   string          `json:"resource,omitempty"`
	Effect     string          `json:"effect,omitempty"`
	Task       string          `json:"task,omitempty"`
	Approval   string          `json:"approval,omitempty"` // the approval presented, when the call needs one
	Key        string          `json:"key"`
	Dir        string          `json:"dir"`  // shared: the execution markers
	Name       string          `json:"name"` // unique among the racers
	Now        int64           `json:"now"`  // the injected clock, unix nanoseconds
	Env        string          `json:"env"`  // the environment of the call
	Agent      string          `json:"agent"`
	User       string          `json:"user,omitempty"`
	Faults     []string        `json:"faults,omitempty"`
}

const roleRacer = "racer"

// childResult is what a racer reports on its standard output once it has raced.
type childResult struct {
	Name    string `json:"name"`
	Outcome string `json:"outcome"`          // committed, refused or error
	State   string `json:"state,omitempty"`  // refused: the effect state, or the reason, that refused it
	Budget  string `json:"budget,omitempty"` // refused on a budget: which
	Error   string `json:"error,omitempty"`
}

// Child must be the first call in main (and in TestMain of tests that call Run). When the binary
// was re-executed by Run as a G4 racer — an environment variable says so — it opens the scratch
// store, waits on its standard input for the start, makes its one protected call, reports on its
// standard output, and exits the process. Otherwise it returns at once.
func Child() {
	raw, ok := os.LookupEnv(childEnv)
	if !ok {
		return
	}
	var spec childSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintf(os.Stderr, "latch verify racer: %s: %v\n", childEnv, err)
		os.Exit(2)
	}
	if err := spec.run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "latch verify racer %s: %v\n", spec.Name, err)
		os.Exit(1)
	}
	os.Exit(0)
}

func (c *childSpec) run(in io.Reader, out io.Writer) error {
	if c.Role != roleRacer {
		return fmt.Errorf("unknown role %q", c.Role)
	}
	ctx, cancel := context.WithTimeout(context.Background(), raceTimeout)
	defer cancel()
	pol, err := policy.Load(c.PolicyFile)
	if err != nil {
		return err
	}
	faults, err := parseFaults(c.Faults)
	if err != nil {
		return err
	}
	now := time.Unix(0, c.Now).UTC()
	g, _, err := openGuard(ctx, pol, c.URL, c.Env, func() time.Time { return now }, faults, guardOptions{})
	if err != nil {
		return err
	}
	defer g.Close()
	if _, err := io.WriteString(out, "ready\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil || line != "go\n" {
		return fmt.Errorf("waiting for the start: got %q, %v", line, err)
	}

	call := &latch.Call{Action: c.Action, Arguments: c.Args, Resource: c.Resource}
	if c.Effect != "" || c.Task != "" {
		call.Options = &latch.Options{Effect: c.Effect, Task: c.Task}
	}
	pctx := withPrincipal(ctx, latch.Principal{Agent: c.Agent, User: c.User})
	if c.Approval != "" {
		pctx = latch.WithApproval(pctx, c.Approval)
	}
	_, err = g.Execute(pctx, call, func(ctx context.Context, args json.RawMessage) (any, error) {
		f, err := os.OpenFile(filepath.Join(c.Dir, execMarker+c.Name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, latch.NotExecuted(err)
		}
		_, werr := f.WriteString(c.Key)
		if err := errors.Join(werr, f.Close()); err != nil {
			return nil, err
		}
		return map[string]any{"racer": c.Name}, nil
	})
	res := childResult{Name: c.Name, Outcome: "committed"}
	var ee *latch.EffectError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		res.Outcome, res.State = "refused", ee.Reason
	default:
		res.Outcome, res.Error = "error", err.Error()
		// A refusal the pipeline decided (a budget's, the authority's…) is reported by its
		// reason; what it could not decide stays an error.
		switch rf := latch.RefusalOf(err); rf.Kind {
		case latch.KindInternal, latch.KindOutcomeUnknown, latch.KindNotExecuted:
		default:
			res.Outcome, res.State, res.Budget, res.Error = "refused", string(rf.Reason), rf.Budget, ""
		}
	}
	return json.NewEncoder(out).Encode(res)
}

// raceResult is what a race observed.
type raceResult struct {
	execs    map[string]int // executions per effect key, from the markers
	total    int            // executions in all
	outcomes []childResult
}

// committed counts the racers that reported a commit.
func (rr *raceResult) committed() int {
	n := 0
	for _, o := range rr.outcomes {
		if o.Outcome == "committed" {
			n++
		}
	}
	return n
}

func (rr *raceResult) String() string {
	counts := map[string]int{}
	for _, o := range rr.outcomes {
		k := o.Outcome
		if o.State != "" {
			k += " " + o.State
		}
		counts[k]++
	}
	var parts []string
	for _, k := range []string{"committed", "refused committed", "refused in_progress", "refused ambiguous", "error"} {
		if counts[k] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[k], k))
			delete(counts, k)
		}
	}
	for k, n := range counts {
		parts = append(parts, fmt.Sprintf("%d %s", n, k))
	}
	for _, o := range rr.outcomes {
		if o.Outcome == "error" {
			parts = append(parts, "first error: "+o.Error)
			break
		}
	}
	return fmt.Sprintf("executions: %d; racers: %s", rr.total, strings.Join(parts, ", "))
}

// proc is one racer process.
type proc struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr bytes.Buffer
}

// race starts one OS process per variant, all against the scratch store of e, releases them
// together and collects what they did.
func (r *runner) race(ctx context.Context, e *env, pk *pick, vs []variant, dir string) (*raceResult, error) {
	exe := r.cfg.Executable
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("race: find the executable to re-execute: %w", err)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("race: %w", err)
	}
	policyFile := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policyFile, e.sp.doc, 0o600); err != nil {
		return nil, fmt.Errorf("race: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, raceTimeout)
	defer cancel()

	var procs []*proc
	waited := false
	defer func() {
		if !waited {
			cancel() // kills whatever still runs
			for _, p := range procs {
				_ = p.cmd.Wait()
			}
		}
	}()
	for i, v := range vs {
		args, _ := json.Marshal(v.Args)
		spec := childSpec{
			Role: roleRacer, URL: e.url, PolicyFile: policyFile, Action: pk.Action, Args: args,
			Resource: v.Resource, Effect: v.Effect, Task: v.Task, Approval: v.approval, Key: v.Key, Dir: dir, Name: fmt.Sprintf("racer-%d", i),
			Now: e.clock.Now().UnixNano(), Env: r.env, Agent: pk.principal().Agent, User: pk.principal().User, Faults: r.faults.list(),
		}
		raw, err := json.Marshal(spec)
		if err != nil {
			return nil, fmt.Errorf("race: %w", err)
		}
		p := &proc{cmd: exec.CommandContext(ctx, exe)}
		p.cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
		p.cmd.Stderr = &p.stderr
		if p.in, err = p.cmd.StdinPipe(); err != nil {
			return nil, fmt.Errorf("race: %w", err)
		}
		stdout, err := p.cmd.StdoutPipe()
		if err != nil {
			return nil, fmt.Errorf("race: %w", err)
		}
		p.out = bufio.NewReader(stdout)
		if err := p.cmd.Start(); err != nil {
			return nil, fmt.Errorf("race: start %s: %w", exe, err)
		}
		procs = append(procs, p)
	}
	fault := func(i int, what string, err error) error {
		cancel()
		for _, p := range procs {
			_ = p.cmd.Wait()
		}
		waited = true
		return fmt.Errorf("race: racer %d %s (does main call verify.Child() first?): %v: %s",
			i, what, err, strings.TrimSpace(procs[i].stderr.String()))
	}
	for i, p := range procs {
		line, err := p.out.ReadString('\n')
		if line != "ready\n" {
			return nil, fault(i, "did not get ready", errors.Join(err, fmt.Errorf("read %q", line)))
		}
	}
	// Released as close together as the pipes allow: every racer is blocked reading its input.
	for i, p := range procs {
		_, err := io.WriteString(p.in, "go\n")
		if err = errors.Join(err, p.in.Close()); err != nil {
			return nil, fault(i, "could not be started", err)
		}
	}
	rr := &raceResult{execs: map[string]int{}}
	for i, p := range procs {
		line, err := p.out.ReadString('\n')
		var res childResult
		if err == nil {
			err = json.Unmarshal([]byte(line), &res)
		}
		if err != nil {
			return nil, fault(i, "did not report", err)
		}
		rr.outcomes = append(rr.outcomes, res)
	}
	waited = true
	var errs []error
	for i, p := range procs {
		if err := p.cmd.Wait(); err != nil {
			errs = append(errs, fmt.Errorf("race: racer %d: %v: %s", i, err, strings.TrimSpace(p.stderr.String())))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("race: %w", err)
	}
	for _, en := range entries {
		if !strings.HasPrefix(en.Name(), execMarker) {
			continue
		}
		key, err := os.ReadFile(filepath.Join(dir, en.Name()))
		if err != nil {
			return nil, fmt.Errorf("race: %w", err)
		}
		rr.execs[string(key)]++
		rr.total++
	}
	return rr, nil
}
