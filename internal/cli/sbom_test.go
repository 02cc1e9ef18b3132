package cli

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/jsonschema-go/jsonschema"

	"github.com/latchkit/latch"
)

// cyclonedxSchemas loads the CycloneDX 1.6 JSON schema from testdata/cyclonedx: the published
// schema files of the CycloneDX specification (github.com/CycloneDX/specification, schema/),
// as shipped unchanged in github.com/CycloneDX/cyclonedx-go@v0.12.0/schema (its README names
// each file's $id and SHA-256). The BOM schema refers to the SPDX licence list and the JSON
// signature format by relative $ref; the loader serves those from the same directory, so
// validation never reaches the network.
func cyclonedxSchema(t *testing.T) *jsonschema.Resolved {
	t.Helper()
	read := func(name string) *jsonschema.Schema {
		b, err := os.ReadFile(filepath.Join("testdata", "cyclonedx", name))
		if err != nil {
			t.Fatal(err)
		}
		var s jsonschema.Schema
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("schema %s: %v", name, err)
		}
		return &s
	}
	loader := func(u *url.URL) (*jsonschema.Schema, error) {
		if u.Host != "cyclonedx.org" || path.Dir(u.Path) != "/schema" {
			return nil, fmt.Errorf("schema %s is not one of testdata/cyclonedx", u)
		}
		name := path.Base(u.Path)
		if name != "spdx.schema.json" && name != "jsf-0.82.schema.json" {
			return nil, fmt.Errorf("schema %s is not one of testdata/cyclonedx", u)
		}
		return read(name), nil
	}
	rs, err := read("bom-1.6.schema.json").Resolve(&jsonschema.ResolveOptions{Loader: loader})
	if err != nil {
		t.Fatalf("resolve the CycloneDX schema: %v", err)
	}
	return rs
}

// validateBOM validates the JSON document b against the schema.
func validateBOM(rs *jsonschema.Resolved, b []byte) error {
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		return err
	}
	return rs.Validate(doc)
}

// buildLatch builds cmd/latch into a temporary directory and returns its path. It builds with
// the environment's own flags, so the build reuses the build cache the other tests filled (the
// release flags of docs/releasing.md change every package's cache key: scripts/repro.sh builds
// with those).
func buildLatch(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "latch")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/latchkit/latch/cmd/latch")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/latch: %v\n%s", err, out)
	}
	return bin
}

// sbomDoc is the part of a CycloneDX document the test reads.
type sbomDoc struct {
	BOMFormat   string `json:"bomFormat"`
	SpecVersion string `json:"specVersion"`
	Metadata    struct {
		Component  sbomComponent `json:"component"`
		Properties []sbomProp    `json:"properties"`
	} `json:"metadata"`
	Components   []sbomComponent `json:"components"`
	Dependencies []struct {
		Ref       string   `json:"ref"`
		DependsOn []string `json:"dependsOn"`
	} `json:"dependencies"`
}

type sbomComponent struct {
	Ref     string `json:"bom-ref"`
	Type    string `json:"type"`
	Name    string `json:"name"`
	Version string `json:"version"`
	PURL    string `json:"purl"`
	Hashes  []struct {
		Alg     string `json:"alg"`
		Content string `json:"content"`
	} `json:"hashes"`
}

type sbomProp struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// TestVersionSBOM builds the real binary, runs `latch version --sbom`, and validates what it
// prints against the CycloneDX 1.6 JSON schema; then holds its content to what the Go command
// itself reads from the same binary (`go version -m`): every module with its version and go.sum
// hash, the Go version, and the build settings.
func TestVersionSBOM(t *testing.T) {
	t.Parallel()
	bin := buildLatch(t)
	out, err := exec.Command(bin, "version", "--sbom").Output()
	if err != nil {
		t.Fatalf("latch version --sbom: %v", err)
	}
	rs := cyclonedxSchema(t)
	if err := validateBOM(rs, out); err != nil {
		t.Fatalf("latch version --sbom is not a valid CycloneDX 1.6 document: %v\n%s", err, out)
	}
	// The validator must be able to say no: the same document with a hash algorithm the
	// specification does not list, and without its bomFormat, is refused.
	for _, bad := range []struct{ from, to string }{
		{`"alg": "SHA-256"`, `"alg": "SHA-257"`},
		{`"bomFormat": "CycloneDX",`, ``},
	} {
		mutated := bytes.Replace(out, []byte(bad.from), []byte(bad.to), 1)
		if bytes.Equal(mutated, out) {
			t.Fatalf("the SBOM has no %s to change", bad.from)
		}
		if err := validateBOM(rs, mutated); err == nil {
			t.Errorf("the SBOM with %s changed to %q validates; the schema check proves nothing", bad.from, bad.to)
		}
	}

	again, err := exec.Command(bin, "version", "--sbom").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, again) {
		t.Errorf("two runs of latch version --sbom differ; the SBOM of one binary must be one document")
	}

	var doc sbomDoc
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.BOMFormat != "CycloneDX" || doc.SpecVersion != "1.6" {
		t.Errorf("bomFormat %q specVersion %q, want CycloneDX 1.6", doc.BOMFormat, doc.SpecVersion)
	}
	if c := doc.Metadata.Component; c.Name != "github.com/latchkit/latch/cmd/latch" || c.Version != latch.Version || c.Type != "application" {
		t.Errorf("metadata.component = %+v, want the application github.com/latchkit/latch/cmd/latch at %s", c, latch.Version)
	}

	// What the Go command reads from the binary, independently of latch.
	gv, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	// go version -m prints "FILE: GOVERSION", then the build info indented by a tab.
	head, body, _ := strings.Cut(string(gv), "\n")
	body = strings.ReplaceAll(strings.TrimPrefix(body, "\t"), "\n\t", "\n")
	bi, err := debug.ParseBuildInfo(body)
	if err != nil {
		t.Fatalf("parse go version -m: %v\n%s", err, gv)
	}
	if _, bi.GoVersion, _ = strings.Cut(head, ": "); !strings.HasPrefix(bi.GoVersion, "go1.") {
		t.Fatalf("go version -m's first line %q names no Go version", head)
	}
	if len(bi.Deps) < 10 {
		t.Fatalf("go version -m lists %d modules; the build info was not read", len(bi.Deps))
	}
	type mod struct{ Version, SHA256 string }
	want := map[string]mod{"std": {Version: bi.GoVersion}}
	for _, d := range bi.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(d.Sum, "h1:"))
		if err != nil {
			t.Fatalf("go.sum hash %q of %s: %v", d.Sum, d.Path, err)
		}
		want[d.Path] = mod{Version: d.Version, SHA256: hex.EncodeToString(raw)}
	}
	got := map[string]mod{}
	var refs []string
	for _, c := range doc.Components {
		m := mod{Version: c.Version}
		for _, h := range c.Hashes {
			if h.Alg == "SHA-256" {
				m.SHA256 = h.Content
			}
		}
		got[c.Name] = m
		refs = append(refs, c.Ref)
		if c.Name != "std" && c.PURL != "pkg:golang/"+c.Name+"@"+c.Version {
			t.Errorf("component %s purl %q, want pkg:golang/%s@%s", c.Name, c.PURL, c.Name, c.Version)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SBOM components differ from go version -m (-want +got):\n%s", diff)
	}
	if len(doc.Dependencies) == 0 || doc.Dependencies[0].Ref != doc.Metadata.Component.Ref {
		t.Fatalf("dependencies %+v, want the binary's first", doc.Dependencies)
	}
	if diff := cmp.Diff(refs, doc.Dependencies[0].DependsOn); diff != "" {
		t.Errorf("the binary's dependsOn differs from its components (-want +got):\n%s", diff)
	}

	props := map[string]string{}
	for _, p := range doc.Metadata.Properties {
		props[p.Name] = p.Value
	}
	wantProps := map[string]string{"latch:build:go": bi.GoVersion}
	for _, s := range bi.Settings {
		wantProps["latch:build:"+s.Key] = s.Value
	}
	if diff := cmp.Diff(wantProps, props); diff != "" {
		t.Errorf("SBOM build properties differ from go version -m (-want +got):\n%s", diff)
	}
	for _, k := range []string{"latch:build:GOOS", "latch:build:GOARCH", "latch:build:CGO_ENABLED", "latch:build:-compiler"} {
		if props[k] == "" {
			t.Errorf("properties %v lack %s", props, k)
		}
	}
}

// TestBuildSBOM covers what a source build cannot show: a binary installed at a tagged version
// (its package URL names the tag and the command's subpath, its hash is the module's), a
// replaced module (described by its replacement), and a binary without build information.
func TestBuildSBOM(t *testing.T) {
	t.Parallel()
	sum := "h1:" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xab}, 32))
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.0 X:jsonv2", Path: "github.com/latchkit/latch/cmd/latch",
		Main: debug.Module{Path: "github.com/latchkit/latch", Version: "v0.2.0", Sum: sum},
		Deps: []*debug.Module{
			{Path: "example.com/a", Version: "v1.2.3", Sum: sum},
			{Path: "example.com/b", Version: "v1.0.0", Replace: &debug.Module{Path: "../b"}},
		},
		Settings: []debug.BuildSetting{{Key: "-trimpath", Value: "true"}},
	}
	var buf bytes.Buffer
	if err := writeSBOM(&buf, bi); err != nil {
		t.Fatal(err)
	}
	if err := validateBOM(cyclonedxSchema(t), buf.Bytes()); err != nil {
		t.Fatalf("SBOM invalid: %v\n%s", err, buf.Bytes())
	}
	var doc sbomDoc
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if got, want := doc.Metadata.Component.PURL, "pkg:golang/github.com/latchkit/latch@v0.2.0#cmd/latch"; got != want {
		t.Errorf("main purl = %q, want %q", got, want)
	}
	if h := doc.Metadata.Component.Hashes; len(h) != 1 || h[0].Content != strings.Repeat("ab", 32) {
		t.Errorf("main hashes = %+v, want the module's go.sum hash in hex", h)
	}
	names := []string{}
	for _, c := range doc.Components {
		names = append(names, c.Name+"@"+c.Version+" "+c.PURL)
	}
	wantNames := []string{"std@go1.26.0 X:jsonv2 pkg:golang/std@go1.26.0", "example.com/a@v1.2.3 pkg:golang/example.com/a@v1.2.3", "../b@ pkg:golang/../b"}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Errorf("components (-want +got):\n%s", diff)
	}
	if err := writeSBOM(&buf, nil); err == nil || !strings.Contains(err.Error(), "no build information") {
		t.Errorf("writeSBOM(nil) = %v, want an error saying there is no build information", err)
	}
}
