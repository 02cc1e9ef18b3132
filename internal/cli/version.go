package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/latchkit/latch"
	"github.com/latchkit/latch/policy"
	"github.com/latchkit/latch/receipt"
	"github.com/latchkit/latch/store/postgres"
	"github.com/latchkit/latch/store/sqlite"
)

// modulePath is the module latch is built from, reported when the binary carries no build info.
const modulePath = "github.com/latchkit/latch"

// versionJSON is what `latch version --json` prints: the release, the build, and the versions
// of every format the binary reads and writes, so an operator can tell which binaries may share
// a store and a receipt chain.
type versionJSON struct {
	Version       string      `json:"version"` // latch's release (latch.Version)
	Module        string      `json:"module"`
	ModuleVersion string      `json:"module_version"` // as the Go command recorded it: a tag, or "(devel)" for a source build
	Go            string      `json:"go"`
	Platform      string      `json:"platform"`
	Revision      string      `json:"revision,omitempty"`
	Modified      bool        `json:"modified,omitempty"`
	Committed     string      `json:"committed,omitempty"`
	Schemas       schemasJSON `json:"schemas"`
}

// schemasJSON are the store schema versions this binary writes and the document schemas it
// reads and writes.
type schemasJSON struct {
	SQLite   int    `json:"sqlite"`
	Postgres int    `json:"postgres"`
	Receipt  string `json:"receipt"`
	Policy   string `json:"policy"`
}

// buildVersion reports the binary described by bi (nil when it carries no build info). The
// version is the release the source is; the module version is the one `go install …@vX.Y.Z`
// records, "(devel)" for a build from a checkout.
func buildVersion(bi *debug.BuildInfo) versionJSON {
	v := versionJSON{
		Version: latch.Version, Module: modulePath, ModuleVersion: "(devel)", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH,
		Schemas: schemasJSON{SQLite: sqlite.SchemaVersion(), Postgres: postgres.SchemaVersion(), Receipt: receipt.Schema, Policy: policy.Schema},
	}
	if bi == nil {
		return v
	}
	if bi.Main.Version != "" {
		v.ModuleVersion = bi.Main.Version
	}
	if bi.Main.Path != "" {
		v.Module = bi.Main.Path
	}
	if bi.GoVersion != "" {
		v.Go = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		case "vcs.time":
			v.Committed = s.Value
		}
	}
	return v
}

func (a *app) versionCommand() *cobra.Command {
	var asJSON, sbom bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, the build information and the schema versions",
		Long: `Print latch's release, the module version (as recorded by go install …@VERSION;
"(devel)" for a source build), the Go version and platform, the VCS revision when built from a
checkout, and the versions of the formats this binary uses: the SQLite and PostgreSQL store
schemas it writes (a store at a newer version is refused), the receipt schema and the policy
schema.

--sbom prints instead a CycloneDX 1.6 software bill of materials (JSON) of this binary, read
from the build information the Go command embedded in it: every module linked in with its
version and go.sum hash, the Go toolchain, and the build settings.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bi, _ := debug.ReadBuildInfo()
			if sbom {
				if asJSON {
					return usagef("--sbom prints JSON of its own; it cannot be combined with --json")
				}
				return writeSBOM(a.stdout, bi)
			}
			v := buildVersion(bi)
			if asJSON {
				return jsonLine(a.stdout, v)
			}
			fmt.Fprintf(a.stdout, "latch %s\n", v.Version)
			t := newTable(a.stdout)
			t.row("module", v.Module)
			t.row("module version", v.ModuleVersion)
			t.row("go", v.Go)
			t.row("platform", v.Platform)
			if v.Revision != "" {
				rev := v.Revision
				if v.Modified {
					rev += " (modified)"
				}
				t.row("revision", rev)
			}
			if v.Committed != "" {
				t.row("committed", v.Committed)
			}
			t.row("sqlite schema", fmt.Sprint(v.Schemas.SQLite))
			t.row("postgres schema", fmt.Sprint(v.Schemas.Postgres))
			t.row("receipt schema", v.Schemas.Receipt)
			t.row("policy schema", v.Schemas.Policy)
			return t.flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	cmd.Flags().BoolVar(&sbom, "sbom", false, "print a CycloneDX SBOM (JSON) of this binary")
	return cmd
}
