package receipt

// Document exposes the map form of a receipt to tests, as the reference its direct writer must
// match byte for byte.
func (r *Receipt) Document() (map[string]any, error) { return r.document() }
