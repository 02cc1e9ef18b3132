package latch

// Version is the release of latch this source tree is, without the leading "v" of its git tag
// (v0.2.0 is Version "0.2.0"). `latch version` prints it, the MCP gateway and the operator's
// MCP server announce it, and the CycloneDX SBOM of `latch version --sbom` names the binary by
// it. It changes only in the commit that cuts a release; docs/versioning.md says what a change
// of each of its numbers promises.
const Version = "0.2.0"
