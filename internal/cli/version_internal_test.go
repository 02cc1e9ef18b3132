package cli

import (
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store/postgres"
	"github.com/latchkit/latch/store/sqlite"
)

// TestBuildVersion checks what `latch version` reports for the build information of a binary
// installed with `go install …@v0.2.0`, of a source build, and of one with none at all.
func TestBuildVersion(t *testing.T) {
	t.Parallel()
	schemas := schemasJSON{SQLite: sqlite.SchemaVersion(), Postgres: postgres.SchemaVersion(), Receipt: receipt.Schema, Policy: "latch.policy/v1"}
	tests := []struct {
		name string
		bi   *debug.BuildInfo
		want versionJSON
	}{
		{
			name: "installed at a version",
			bi: &debug.BuildInfo{GoVersion: "go1.26.0", Path: "github.com/latchkit/latch/cmd/latch",
				Main: debug.Module{Path: "github.com/latchkit/latch", Version: "v0.2.0", Sum: "h1:x"}},
			want: versionJSON{Version: "0.2.0", Module: "github.com/latchkit/latch", ModuleVersion: "v0.2.0", Go: "go1.26.0"},
		},
		{
			name: "built from a modified checkout",
			bi: &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/latchkit/latch", Version: "(devel)"},
				Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "8be7682"}, {Key: "vcs.modified", Value: "true"}, {Key: "vcs.time", Value: "2026-12-01T11:52:41Z"}}},
			want: versionJSON{Version: "0.2.0", Module: "github.com/latchkit/latch", ModuleVersion: "(devel)", Go: "go1.26.8",
				Revision: "8be7682", Modified: true, Committed: "2026-12-01T11:52:41Z"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := buildVersion(tt.bi)
			tt.want.Platform = got.Platform
			tt.want.Schemas = schemas
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("buildVersion() mismatch (-want +got):\n%s", diff)
			}
		})
	}
	if got := buildVersion(nil); got.Version != "0.2.0" || got.ModuleVersion != "(devel)" || got.Module != modulePath || got.Schemas != schemas {
		t.Errorf("buildVersion(nil) = %+v, want 0.2.0, (devel), %s and the schemas %+v", got, modulePath, schemas)
	}
	if schemas.SQLite < 1 || schemas.Postgres < 1 {
		t.Errorf("schema versions %+v, want both at least 1", schemas)
	}
}
