// Package browsertest drives the web console of `latch serve` with Debian's chromium, headless,
// through chromedp: the flows a person goes through — log in, answer, resolve — on a real
// server over a real store, with a screenshot of each page. It is a module of its own so that
// chromedp is no dependency of latch. scripts/test.sh installs chromium and runs it with
// LATCH_REQUIRE_BROWSER=1, which turns a missing browser into a failure.
package browsertest
