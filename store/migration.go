package store

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one schema version of a backend: forward-only SQL applied in one transaction.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// LoadMigrations reads a backend's embedded migrations, files named NNNN_what.sql under dir,
// and returns them in version order. The versions must be 1, 2, 3, … without gaps: a missing or
// misnumbered file is a build mistake, so backends call it at package initialisation and panic.
func LoadMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	ms := make([]Migration, 0, len(names))
	for i, name := range names {
		base := path.Base(name)
		num, _, _ := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if err != nil || v != i+1 {
			return nil, fmt.Errorf("migration %s is not version %d", base, i+1)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: base, SQL: string(b)})
	}
	return ms, nil
}
