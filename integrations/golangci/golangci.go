// Package latchgolangci registers latch's scan (package github.com/latchkit/latch/scan) with
// golangci-lint's module plugin system, as the linter "latchscan": it reports calls of
// consequential APIs that are not reached through latch.
//
// golangci-lint builds a binary with the plugin compiled in (golangci-lint custom), from a
// .custom-gcl.yml that names this module:
//
//	version: v2.15.0
//	plugins:
//	  - module: github.com/latchkit/latch/integrations/golangci
//	    import: github.com/latchkit/latch/integrations/golangci
//	    version: v0.2.0
//
// and .golangci.yml enables it, optionally naming the scan configuration:
//
//	version: "2"
//	linters:
//	  enable: [latchscan]
//	  settings:
//	    custom:
//	      latchscan:
//	        type: module
//	        settings:
//	          config: latch.scan.yaml
//
// Without config, each package uses the latch.scan.yaml found from its directory up to its
// module root. docs/scan.md of the latch repository describes the configuration and what
// counts as protected.
package latchgolangci

import (
	"fmt"

	"github.com/golangci/plugin-module-register/register"
	"golang.org/x/tools/go/analysis"

	"github.com/latchkit/latch/scan"
)

// Name is the linter's name in golangci-lint's configuration.
const Name = "latchscan"

func init() { register.Plugin(Name, New) }

// Settings are the linter's settings in .golangci.yml.
type Settings struct {
	// Config is the scan configuration file; empty, each package uses the latch.scan.yaml
	// found from its directory up to its module root.
	Config string `json:"config"`
}

// New builds the plugin from its settings; a configuration that cannot be used is refused
// here, naming its file, line and field, so golangci-lint stops before linting anything.
func New(conf any) (register.LinterPlugin, error) {
	s, err := register.DecodeSettings[Settings](conf)
	if err != nil {
		return nil, fmt.Errorf("%s settings: %w", Name, err)
	}
	if s.Config == "" {
		return &plugin{analyzer: scan.Analyzer}, nil
	}
	cfg, err := scan.LoadConfig(s.Config)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", Name, err)
	}
	return &plugin{analyzer: scan.New(cfg)}, nil
}

type plugin struct{ analyzer *analysis.Analyzer }

func (p *plugin) BuildAnalyzers() ([]*analysis.Analyzer, error) {
	return []*analysis.Analyzer{p.analyzer}, nil
}

// GetLoadMode asks for types: the scan matches callees by their declaring package and type.
func (p *plugin) GetLoadMode() string { return register.LoadModeTypesInfo }
