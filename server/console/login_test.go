package console_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latchkit/latch/internal/consoletest"
	"github.com/latchkit/latch/server/console"
)

// checks counts the password checks a console makes, and how many run at once; each takes at
// least hold, so that concurrent logins overlap.
type checks struct {
	hold           time.Duration
	calls, now, hi atomic.Int32
}

func (c *checks) check(hash, password string) error {
	c.calls.Add(1)
	n := c.now.Add(1)
	defer c.now.Add(-1)
	for {
		h := c.hi.Load()
		if n <= h || c.hi.CompareAndSwap(h, n) {
			break
		}
	}
	time.Sleep(c.hold)
	return console.CheckPassword(hash, password)
}

// loginForms fetches n login forms, each in its own client, ready to post.
func loginForms(t *testing.T, s *consoletest.Server, n int) ([]*http.Client, []url.Values) {
	t.Helper()
	cs, fs := make([]*http.Client, n), make([]url.Values, n)
	for i := range n {
		cs[i] = consoletest.Client(t, "")
		fs[i] = url.Values{"csrf": {consoletest.CSRF(consoletest.Get(t, cs[i], s.URL+"/login").Body)}, "next": {"/approvals"}}
	}
	return cs, fs
}

// postAll sends every form at once and counts the answers by status.
func postAll(t *testing.T, s *consoletest.Server, cs []*http.Client, fs []url.Values) (map[int]int, []string) {
	t.Helper()
	var mu sync.Mutex
	status, bodies := map[int]int{}, []string{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range cs {
		wg.Go(func() {
			<-start
			p := consoletest.Post(t, cs[i], s.URL+"/login", fs[i])
			mu.Lock()
			status[p.Status]++
			bodies = append(bodies, p.Body)
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	return status, bodies
}

// Wrong passwords sent at once for one account are checked against the limit as they start,
// not as they end: at most the limit (5) are ever checked, the rest are refused 429 unchecked,
// and then the account is locked.
func TestConcurrentWrongPasswordsLimited(t *testing.T) {
	t.Parallel()
	ck := &checks{hold: 100 * time.Millisecond}
	cfg := console.Config{LoginConcurrency: 100}
	console.SetCheckPassword(&cfg, ck.check)
	s := consoletest.Start(t, &consoletest.Options{Console: cfg})
	s.AddAccount(t, "alice", pw, "payments-leads")
	cs, fs := loginForms(t, s, 40)
	for i := range fs {
		fs[i].Set("name", "alice")
		fs[i].Set("password", fmt.Sprintf("wrong password %d", i))
	}
	status, _ := postAll(t, s, cs, fs)
	if n := ck.calls.Load(); n > 5 {
		t.Errorf("40 wrong passwords at once: %d were checked, want at most 5", n)
	}
	if status[http.StatusUnauthorized] > 5 || status[http.StatusUnauthorized]+status[http.StatusTooManyRequests] != 40 {
		t.Errorf("40 wrong passwords at once answered %v, want at most 5 × 401 and the rest 429", status)
	}
	// Locked now: the right password is refused, unchecked.
	before := ck.calls.Load()
	if r := consoletest.Login(t, consoletest.Client(t, ""), s.URL, "alice", pw); r.Status != http.StatusTooManyRequests {
		t.Errorf("the right password after the burst = %d, want 429", r.Status)
	}
	if n := ck.calls.Load(); n != before {
		t.Errorf("a login refused while locked was checked")
	}
}

// Password checks are bounded however many logins arrive at once (each names another account,
// so the per-account limit does not apply): beyond LoginConcurrency a login is refused 429 at
// once, and bcrypt never runs more than that many times at once.
func TestLoginConcurrencyBounded(t *testing.T) {
	t.Parallel()
	ck := &checks{hold: 200 * time.Millisecond}
	cfg := console.Config{LoginConcurrency: 2}
	console.SetCheckPassword(&cfg, ck.check)
	s := consoletest.Start(t, &consoletest.Options{Console: cfg})
	cs, fs := loginForms(t, s, 20)
	for i := range fs {
		fs[i].Set("name", fmt.Sprintf("user%d", i))
		fs[i].Set("password", "some password")
	}
	status, bodies := postAll(t, s, cs, fs)
	if hi := ck.hi.Load(); hi > 2 {
		t.Errorf("20 logins at once ran %d password checks at once, want at most 2", hi)
	}
	if status[http.StatusTooManyRequests] == 0 || status[http.StatusUnauthorized]+status[http.StatusTooManyRequests] != 20 {
		t.Errorf("20 logins at once answered %v, want some 429 and the rest 401", status)
	}
	busy := false
	for _, b := range bodies {
		busy = busy || strings.Contains(b, "Too many logins at once")
	}
	if !busy {
		t.Errorf("no refusal says the console is busy with other logins")
	}
	// Once they are done, a login is checked again.
	if r := consoletest.Login(t, consoletest.Client(t, ""), s.URL, "nobody", "some password"); r.Status != http.StatusUnauthorized {
		t.Errorf("a login after the burst = %d, want 401", r.Status)
	}
}
