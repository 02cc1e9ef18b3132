package latch

// BegunKept reports the calls g keeps in memory for their outcome and the bytes they are
// counted at.
func (g *Guard) BegunKept() (int, int64) { return g.begun.kept() }

// SetBegunBounds sets the bytes g keeps for begun calls, in all and per principal.
func (g *Guard) SetBegunBounds(total, principal int64) {
	g.begun.mu.Lock()
	defer g.begun.mu.Unlock()
	g.begun.maxBytes, g.begun.principalBytes = total, principal
}
