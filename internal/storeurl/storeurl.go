// Package storeurl names the store latch uses when none is configured; Open and the latch
// command share it, so a program and the command beside it find the same store.
package storeurl

import "path/filepath"

// DefaultPlace is where scratch stores go when no store is configured (store.NewScratch): the
// default backend's, SQLite files in a temporary directory.
const DefaultPlace = "sqlite:"

// Default is the store used when none is configured: $LATCH_STORE, else a SQLite file in
// .latch/ beside the policy, so workers started from different directories share one store.
func Default(policyPath string, getenv func(string) string) string {
	if u := getenv("LATCH_STORE"); u != "" {
		return u
	}
	dir := "."
	if policyPath != "" {
		dir = filepath.Dir(policyPath)
	}
	return "sqlite:" + filepath.Join(dir, ".latch", "state.db")
}
