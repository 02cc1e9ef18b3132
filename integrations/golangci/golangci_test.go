package latchgolangci_test

import (
	"strings"
	"testing"

	"github.com/golangci/plugin-module-register/register"
	"golang.org/x/tools/go/analysis/analysistest"

	latchgolangci "github.com/latchkit/latch/integrations/golangci"
)

// TestPlugin builds the plugin as golangci-lint does — by name from the registry, with the
// settings of .golangci.yml — and runs its analyzer on a package: the unprotected call is
// reported, the protected one and another type's Charge are not.
func TestPlugin(t *testing.T) {
	newPlugin, err := register.GetPlugin(latchgolangci.Name)
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPlugin(map[string]any{"config": "testdata/latch.scan.yaml"})
	if err != nil {
		t.Fatalf("new plugin: %v", err)
	}
	if got := p.GetLoadMode(); got != register.LoadModeTypesInfo {
		t.Errorf("GetLoadMode() = %q, want %q", got, register.LoadModeTypesInfo)
	}
	analyzers, err := p.BuildAnalyzers()
	if err != nil || len(analyzers) != 1 {
		t.Fatalf("BuildAnalyzers() = %v, %v, want one analyzer", analyzers, err)
	}
	analysistest.Run(t, analysistest.TestData(), analyzers[0], "app")
}

func TestPluginRefusesBadSettings(t *testing.T) {
	newPlugin, err := register.GetPlugin(latchgolangci.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		settings map[string]any
		want     string
	}{
		{map[string]any{"config": "testdata/bad.scan.yaml"}, "latchscan: testdata/bad.scan.yaml:5: calls[0].hosts: only for package net/http (this rule is for example.com/pay)"},
		{map[string]any{"config": "testdata/missing.yaml"}, "latchscan: read scan configuration: open testdata/missing.yaml: no such file or directory"},
		{map[string]any{"konfig": "x"}, `latchscan settings: decoding settings: json: unknown field "konfig"`},
	} {
		_, err := newPlugin(tc.settings)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("new plugin with %v = %v, want %q", tc.settings, err, tc.want)
		}
	}
}
