module github.com/latchkit/latch/integrations/golangci

go 1.26.0

require (
	github.com/golangci/plugin-module-register v0.1.2
	github.com/latchkit/latch v0.0.0-00010101000000-000000000000
	golang.org/x/tools v0.52.0
)

require (
	go.yaml.in/yaml/v3 v3.0.6 // indirect
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/sync v0.25.0 // indirect
)

replace github.com/latchkit/latch => ../..
