module github.com/latchkit/latch/integrations/temporal

go 1.26.0

require github.com/latchkit/latch v0.0.0-00010101000000-000000000000

require go.temporal.io/sdk v1.51.0 // indirect

replace github.com/latchkit/latch => ../..
