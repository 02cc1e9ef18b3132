package cli

// The latch command opens every store backend of this module: importing a backend registers its
// URL schemes with package store, and latch.Open, latch.OpenStore and store.Open dispatch on them.
import (
	_ "github.com/latchkit/latch/store/postgres" // postgres:// and postgresql://
	_ "github.com/latchkit/latch/store/sqlite"   // sqlite:PATH
)
