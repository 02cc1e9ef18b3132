package store_test

import (
	"testing"
	"testing/fstest"

	"github.com/latchkit/latch/store"
)

func TestLoadMigrations(t *testing.T) {
	t.Parallel()
	ok := fstest.MapFS{
		"m/0002_more.sql": {Data: []byte("two")},
		"m/0001_init.sql": {Data: []byte("one")},
		"m/README":        {Data: []byte("not a migration")},
	}
	ms, err := store.LoadMigrations(ok, "m")
	if err != nil || len(ms) != 2 || ms[0].Version != 1 || ms[0].SQL != "one" || ms[1].Name != "0002_more.sql" {
		t.Fatalf("LoadMigrations = %+v, %v", ms, err)
	}
	for name, fsys := range map[string]fstest.MapFS{
		"gap":        {"m/0001_a.sql": {}, "m/0003_c.sql": {}},
		"not number": {"m/init.sql": {}},
		"from zero":  {"m/0000_a.sql": {}},
	} {
		if _, err := store.LoadMigrations(fsys, "m"); err == nil {
			t.Errorf("LoadMigrations(%s) succeeded, want a refusal", name)
		}
	}
}
