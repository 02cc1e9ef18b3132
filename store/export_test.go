package store

// SetRunLimit makes the state check write a run every n keys instead of every runLimit, so that a
// small store exercises the runs and their merge; the returned func restores the limit. Tests that
// call it do not run in parallel.
func SetRunLimit(n int) (restore func()) {
	old := runLimit
	runLimit = n
	return func() { runLimit = old }
}

// UnknownScheme is Lookup's error for url when only registered are registered: the test binary
// links every backend in, so the error a program without one gets is built here.
var UnknownScheme = unknownScheme
