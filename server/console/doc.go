// Package console is the web console of `latch serve`: the pages where people answer approval
// requests, settle effects whose outcome is unknown, and read the receipt chain.
//
// It is server-rendered HTML (html/template) with its stylesheet and one small script embedded
// in the binary; every page works without the script, which only adds live updates from the
// server's event stream. People log in with a local approver account (`latch approver add`,
// passwords kept as bcrypt hashes) or, behind a single-sign-on proxy, by a header that is
// believed only from the proxy's configured addresses. Sessions are HttpOnly, SameSite=Strict
// cookies kept in the store (store.SessionStore, by the SHA-256 of their secret), so they
// outlive a restart and every replica on the store honours them and their logout; every form
// carries a CSRF token; every response carries a strict Content-Security-Policy; text from
// outside is shown with its hidden characters marked (safetext.Escape, as the CLI shows it). An
// answer given here is a verified answer: the approver was authenticated by a session
// ("session") or by the proxy ("proxy").
//
// docs/approvals.md describes the pages and the model behind them.
package console
