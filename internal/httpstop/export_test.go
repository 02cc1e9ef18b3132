package httpstop

// Len is how many connections are fresh now.
func (f *Fresh) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.conns)
}
