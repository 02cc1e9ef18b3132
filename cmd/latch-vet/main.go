// Command latch-vet is latch's scan as a vet tool: it reports calls of consequential APIs that
// are not reached through latch (see docs/scan.md).
//
//	go install github.com/latchkit/latch/cmd/latch-vet@latest
//	go vet -vettool=$(which latch-vet) ./...
//	go vet -vettool=$(which latch-vet) -config=$PWD/latch.scan.yaml ./...
//
// Without -config each package uses the latch.scan.yaml found from its directory up to its
// module root. Run directly (latch-vet ./...) it loads the packages itself, like `latch scan`
// without the summary of allows.
package main

import (
	"golang.org/x/tools/go/analysis/singlechecker"

	"github.com/latchkit/latch/scan"
)

func main() { singlechecker.Main(scan.Analyzer) }
