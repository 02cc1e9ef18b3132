// Package pay is a payment client whose Charge the tests' configuration calls consequential.
package pay

import "context"

type Client struct{}

func (c *Client) Charge(ctx context.Context, cents int) error { return nil }

func (c *Client) Balance(ctx context.Context) (int, error) { return 0, nil }

// Other has a Charge too, which is not the configured one.
type Other struct{}

func (o *Other) Charge(ctx context.Context, cents int) error { return nil }

// Charger is an interface with the configured method name but another receiver type.
type Charger interface {
	Charge(ctx context.Context, cents int) error
}

// Refund is a configured function.
func Refund(ctx context.Context, id string) error { return nil }
