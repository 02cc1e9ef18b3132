// Package scan finds calls of consequential APIs — a payment client's Charge, an HTTP POST to
// a payment host, "git push" — that are not reached through latch: not inside a function given
// to latch.Protect, Guard.Execute or a latch integration wrapper, nor after a checked
// Guard.Begin.
//
// It is a go/analysis analyzer, so the same check runs as `latch scan`, as a `go vet -vettool`
// (cmd/latch-vet), from golangci-lint's module plugin system, and in any driver of analyzers.
// Which calls are consequential, and which functions besides latch's own run their argument
// under latch, is the scan configuration (ConfigFile, latch.scan.yaml; see ParseConfig).
//
// # What counts as protected
//
// The scan looks at one package at a time. A reference to a consequential function is protected
// when every way it can run is under latch: it is called inside a function body that is only
// ever run by a wrapper — directly (the function literal or function given to latch.Protect),
// or through the package's own calls (an unexported helper called only from such bodies) — or
// it is called after a Guard.Begin whose error was checked by an if that returns. A function
// body that is stored, returned, passed to any other function or started with go could be run
// by anyone, so what it calls is unprotected. An exported function of a package that makes
// consequential calls under latch carries a fact, so a package that calls it directly is told.
// Calls made through an interface value or reflection are not seen. docs/scan.md has the whole
// list, with examples.
//
// # Escapes
//
// A //latch:allow comment with a reason, on the line of a reported call or alone on the line above
// it,
// suppresses that report; the scan's Result lists every allow with its reason, and `latch scan`
// prints them as a summary. An allow without a reason, or one that suppresses nothing, is
// itself reported.
//
// The analyzer offers no suggested fixes: wrapping a call in latch.Protect needs an action name
// and an argument type a person chooses, and writing an allow would silence the check.
package scan
