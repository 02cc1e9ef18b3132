package cli

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	cdx "github.com/CycloneDX/cyclonedx-go"

	"github.com/latchkit/latch"
)

// sbomSpec is the CycloneDX specification version `latch version --sbom` writes. 1.6 is the
// newest version whose JSON schema is complete in the cyclonedx-go module (1.7's refers to a
// schema file the module does not ship), so the SBOM is checked against the exact schema in CI.
const sbomSpec = cdx.SpecVersion1_6

// sbomProperty prefixes the names of the properties the SBOM records from the build info. The
// prefix is latch's own namespace, as CycloneDX asks of a producer outside its taxonomy.
const sbomProperty = "latch:build:"

// writeSBOM writes the CycloneDX SBOM of the binary bi describes to w as indented JSON.
func writeSBOM(w io.Writer, bi *debug.BuildInfo) error {
	bom, err := buildSBOM(bi)
	if err != nil {
		return err
	}
	enc := cdx.NewBOMEncoder(w, cdx.BOMFileFormatJSON)
	enc.SetPretty(true)
	if err := enc.EncodeVersion(bom, sbomSpec); err != nil {
		return fmt.Errorf("encode sbom: %w", err)
	}
	return nil
}

// buildSBOM describes the binary of bi as a CycloneDX BOM: the binary itself as the metadata's
// application component, every module linked into it as a library component with its version,
// its go.sum hash and its package URL, the Go toolchain that built it, and the build settings
// (flags, GOOS/GOARCH, CGO_ENABLED, the VCS revision) as properties. The document has no
// timestamp and no serial number, so two runs of one binary print the same bytes — the SBOM of
// a reproducible build is itself reproducible.
func buildSBOM(bi *debug.BuildInfo) (*cdx.BOM, error) {
	if bi == nil {
		return nil, fmt.Errorf("sbom: the binary carries no build information (built without module support)")
	}
	main := mainComponent(bi)
	bom := cdx.NewBOM()
	bom.Metadata = &cdx.Metadata{
		Component: &main,
		Tools: &cdx.ToolsChoice{Components: &[]cdx.Component{{
			Type: cdx.ComponentTypeApplication, Name: "latch", Version: latch.Version,
			Description: "latch version --sbom",
		}}},
		Properties: buildProperties(bi),
	}
	toolchain := goComponent(bi.GoVersion)
	components := []cdx.Component{toolchain}
	refs := []string{toolchain.BOMRef}
	for _, dep := range bi.Deps {
		c, err := moduleComponent(dep)
		if err != nil {
			return nil, err
		}
		components = append(components, c)
		refs = append(refs, c.BOMRef)
	}
	bom.Components = &components
	// The build info lists every module linked in, not who imports whom: the binary depends on
	// each directly, and the graph below it is left unknown rather than guessed.
	deps := []cdx.Dependency{{Ref: main.BOMRef, Dependencies: &refs}}
	for _, r := range refs {
		deps = append(deps, cdx.Dependency{Ref: r})
	}
	bom.Dependencies = &deps
	return bom, nil
}

// mainComponent is the binary: the command's package path, at latch's release, with the main
// module's own version (a tag for `go install …@vX.Y.Z`, "(devel)" for a source build) and its
// hash when the Go command recorded one.
func mainComponent(bi *debug.BuildInfo) cdx.Component {
	name := bi.Path
	if name == "" {
		name = bi.Main.Path
	}
	c := cdx.Component{
		Type: cdx.ComponentTypeApplication, Name: name, Version: latch.Version,
		BOMRef: "pkg:golang/" + name,
	}
	props := []cdx.Property{{Name: sbomProperty + "main.path", Value: bi.Main.Path}}
	if v := bi.Main.Version; v != "" {
		props = append(props, cdx.Property{Name: sbomProperty + "main.version", Value: v})
		if v != "(devel)" {
			// A tagged module version names exactly what was built (the command's package is
			// the package URL's subpath); a devel build has no version a package URL could
			// resolve.
			c.PackageURL = "pkg:golang/" + bi.Main.Path + "@" + v
			if sub := strings.TrimPrefix(strings.TrimPrefix(name, bi.Main.Path), "/"); sub != "" && sub != name {
				c.PackageURL += "#" + sub
			}
			c.BOMRef = c.PackageURL
		}
	}
	if h, ok := sumHash(bi.Main.Sum); ok {
		c.Hashes = &[]cdx.Hash{h}
		props = append(props, cdx.Property{Name: sbomProperty + "main.sum", Value: bi.Main.Sum})
	}
	c.Properties = &props
	return c
}

// goComponent is the Go toolchain: its standard library and runtime are linked into every Go
// binary, so a vulnerability in them is one of the binary's.
func goComponent(goVersion string) cdx.Component {
	// GoVersion may carry experiments after a space ("go1.26.0 X:jsonv2"); the release is the
	// first word.
	release, _, _ := strings.Cut(goVersion, " ")
	purl := "pkg:golang/std@" + release
	return cdx.Component{
		Type: cdx.ComponentTypeLibrary, Name: "std", Version: goVersion,
		Description: "the Go standard library and runtime", PackageURL: purl, BOMRef: purl,
	}
}

// moduleComponent is one module linked into the binary. A replaced module is described by its
// replacement (what was actually compiled), and the module it replaced is kept as a property.
func moduleComponent(dep *debug.Module) (cdx.Component, error) {
	m := dep
	var props []cdx.Property
	if dep.Replace != nil {
		m = dep.Replace
		props = append(props, cdx.Property{Name: sbomProperty + "replaces", Value: dep.Path + "@" + dep.Version})
	}
	if m.Path == "" {
		return cdx.Component{}, fmt.Errorf("sbom: a module of the build info has no path (replacing %q)", dep.Path)
	}
	purl := "pkg:golang/" + m.Path
	if m.Version != "" {
		purl += "@" + m.Version
	}
	c := cdx.Component{
		Type: cdx.ComponentTypeLibrary, Name: m.Path, Version: m.Version,
		PackageURL: purl, BOMRef: purl, Scope: cdx.ScopeRequired,
	}
	if h, ok := sumHash(m.Sum); ok {
		c.Hashes = &[]cdx.Hash{h}
		props = append(props, cdx.Property{Name: sbomProperty + "sum", Value: m.Sum})
	}
	if len(props) > 0 {
		c.Properties = &props
	}
	return c, nil
}

// sumHash turns a go.sum hash ("h1:" and the base64 SHA-256 of the module's file tree summary,
// the one the checksum database publishes) into a CycloneDX SHA-256 hash in hex. Any other form
// (a local replacement has none) gives no hash.
func sumHash(sum string) (cdx.Hash, bool) {
	b64, ok := strings.CutPrefix(sum, "h1:")
	if !ok {
		return cdx.Hash{}, false
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != 32 {
		return cdx.Hash{}, false
	}
	return cdx.Hash{Algorithm: cdx.HashAlgoSHA256, Value: hex.EncodeToString(raw)}, true
}

// buildProperties records the build: the Go version and every setting the Go command stamped
// (-trimpath, -ldflags, -tags, CGO_ENABLED, GOOS, GOARCH, GOAMD64…, vcs.revision, vcs.modified).
func buildProperties(bi *debug.BuildInfo) *[]cdx.Property {
	props := []cdx.Property{{Name: sbomProperty + "go", Value: bi.GoVersion}}
	for _, s := range bi.Settings {
		props = append(props, cdx.Property{Name: sbomProperty + s.Key, Value: s.Value})
	}
	return &props
}
