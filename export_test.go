package latch

// BegunCached reports whether g keeps the call begun under id in memory for its outcome.
func (g *Guard) BegunCached(id string) bool { return g.begun.get(id) != nil }
