package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and build information",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			version, module := "(devel)", "github.com/latchkit/latch"
			settings := map[string]string{}
			goVersion := runtime.Version()
			if bi, ok := debug.ReadBuildInfo(); ok {
				if bi.Main.Version != "" {
					version = bi.Main.Version
				}
				if bi.Main.Path != "" {
					module = bi.Main.Path
				}
				goVersion = bi.GoVersion
				for _, s := range bi.Settings {
					settings[s.Key] = s.Value
				}
			}
			fmt.Fprintf(a.stdout, "latch %s\n", version)
			t := newTable(a.stdout)
			t.row("module", module)
			t.row("go", goVersion)
			t.row("platform", runtime.GOOS+"/"+runtime.GOARCH)
			if rev := settings["vcs.revision"]; rev != "" {
				if settings["vcs.modified"] == "true" {
					rev += " (modified)"
				}
				t.row("revision", rev)
			}
			if at := settings["vcs.time"]; at != "" {
				t.row("committed", at)
			}
			return t.flush()
		},
	}
}
