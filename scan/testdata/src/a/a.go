// Package a holds the cases of the scan: each unprotected reference carries a want comment;
// everything else must stay silent.
package a

import (
	"context"

	"example.com/pay"
	"github.com/latchkit/latch"
)

type ChargeArgs struct{ Cents int }

// A direct call, outside latch.
func chargeDirect(ctx context.Context, c *pay.Client) error {
	return c.Charge(ctx, 100) // want `unprotected call to \(\*example.com/pay.Client\).Charge \(moves money\): not inside a function given to latch.Protect`
}

// A package function of the configuration, outside latch.
func refundDirect(ctx context.Context) error {
	return pay.Refund(ctx, "ch_1") // want `unprotected call to example.com/pay.Refund:`
}

// Inside Protect's closure: protected.
func protectedClosure(g *latch.Guard, c *pay.Client) func(context.Context, ChargeArgs) (string, error) {
	return latch.Protect(g, "charge", func(ctx context.Context, a ChargeArgs) (string, error) {
		return "", c.Charge(ctx, a.Cents)
	}, nil)
}

// Protect instantiated explicitly: still the wrapper.
func explicitInstance(g *latch.Guard, c *pay.Client) func(context.Context, ChargeArgs) (string, error) {
	return latch.Protect[ChargeArgs, string](g, "charge", func(ctx context.Context, a ChargeArgs) (string, error) {
		return "", c.Charge(ctx, a.Cents)
	}, nil)
}

// A same-named method on another type, and on an interface: not the configured API.
func otherCharge(ctx context.Context, o *pay.Other, ch pay.Charger) error {
	if err := o.Charge(ctx, 1); err != nil {
		return err
	}
	return ch.Charge(ctx, 1)
}

// Another method of the configured type: not configured.
func balance(ctx context.Context, c *pay.Client) (int, error) { return c.Balance(ctx) }

// An unexported helper called only from a protected closure: protected.
func helper(ctx context.Context, c *pay.Client, n int) error { return c.Charge(ctx, n) }

func viaHelper(g *latch.Guard, c *pay.Client) func(context.Context, ChargeArgs) (string, error) {
	return latch.Protect(g, "charge", func(ctx context.Context, a ChargeArgs) (string, error) {
		return "", helper(ctx, c, a.Cents)
	}, nil)
}

// A helper called from a protected closure and also directly: its call is reported.
func helper2(ctx context.Context, c *pay.Client) error {
	return c.Charge(ctx, 2) // want `unprotected call`
}

func mixed(ctx context.Context, g *latch.Guard, c *pay.Client) error {
	_ = latch.Protect(g, "charge", func(ctx context.Context, a ChargeArgs) (string, error) {
		return "", helper2(ctx, c)
	}, nil)
	return helper2(ctx, c)
}

// A method value given to Protect: the method's body is protected.
type svc struct{ c *pay.Client }

func (s *svc) charge(ctx context.Context, a ChargeArgs) (string, error) {
	return "", s.c.Charge(ctx, a.Cents)
}

func methodValue(g *latch.Guard, s *svc) func(context.Context, ChargeArgs) (string, error) {
	return latch.Protect(g, "charge", s.charge, nil)
}

// A method value given to Protect and also kept in a field: anyone may call it.
type svc2 struct {
	c    *pay.Client
	hook func(context.Context, ChargeArgs) (string, error)
}

func (s *svc2) charge(ctx context.Context, a ChargeArgs) (string, error) {
	return "", s.c.Charge(ctx, a.Cents) // want `unprotected call`
}

func methodValueEscapes(g *latch.Guard, s *svc2) {
	_ = latch.Protect(g, "charge", s.charge, nil)
	s.hook = s.charge
}

// The consequential method as a value handed out: reported where it escapes.
func passAround(c *pay.Client) func(context.Context, int) error {
	return c.Charge // want `\(\*example.com/pay.Client\).Charge used as a value outside latch`
}

// The consequential method as a value in a local variable called inside Protect: protected.
func localValue(g *latch.Guard, c *pay.Client) func(context.Context, ChargeArgs) (string, error) {
	return latch.Protect(g, "charge", func(ctx context.Context, a ChargeArgs) (string, error) {
		f := c.Charge
		return "", f(ctx, a.Cents)
	}, nil)
}

// A closure held in a local variable and given to Protect: protected.
func localClosure(g *latch.Guard, c *pay.Client) func(context.Context, ChargeArgs) (string, error) {
	fn := func(ctx context.Context, a ChargeArgs) (string, error) {
		return "", c.Charge(ctx, a.Cents)
	}
	return latch.Protect(g, "charge", fn, nil)
}

// The same, but the variable is also called directly: reported.
func localClosureCalled(ctx context.Context, g *latch.Guard, c *pay.Client) {
	fn := func(ctx context.Context, a ChargeArgs) (string, error) {
		return "", c.Charge(ctx, a.Cents) // want `unprotected call`
	}
	_ = latch.Protect(g, "charge", fn, nil)
	_, _ = fn(ctx, ChargeArgs{Cents: 1})
}

// A goroutine started inside Protect's closure may run after it returned: reported.
func goroutine(g *latch.Guard, c *pay.Client) {
	_ = latch.Protect(g, "charge", func(ctx context.Context, a ChargeArgs) (string, error) {
		go func() {
			_ = c.Charge(ctx, a.Cents) // want `unprotected call`
		}()
		return "", nil
	}, nil)
}

// A deferred closure inside Protect's closure runs before it returns: protected.
func deferred(g *latch.Guard, c *pay.Client) {
	_ = latch.Protect(g, "charge", func(ctx context.Context, a ChargeArgs) (string, error) {
		defer func() { _ = c.Charge(ctx, 0) }()
		return "", nil
	}, nil)
}

// A closure stored away: anyone may call it later.
var later []func()

func stored(ctx context.Context, c *pay.Client) {
	later = append(later, func() { _ = c.Charge(ctx, 1) }) // want `unprotected call`
}

// Guard.Execute's executor: protected.
func execute(ctx context.Context, g *latch.Guard, c *pay.Client) {
	_, _ = g.Execute(ctx, &latch.Call{Action: "charge"}, func(ctx context.Context, raw []byte) (any, error) {
		return nil, c.Charge(ctx, 1)
	})
}

// After a checked Guard.Begin: protected.
func begin(ctx context.Context, g *latch.Guard, c *pay.Client) error {
	p, err := g.Begin(ctx, &latch.Call{Action: "charge"})
	if err != nil {
		return err
	}
	_ = p
	return c.Charge(ctx, 1)
}

// Before Begin, or after a Begin whose error is not checked: reported.
func beginUnchecked(ctx context.Context, g *latch.Guard, c *pay.Client) error {
	_ = c.Charge(ctx, 1) // want `unprotected call`
	_, _ = g.Begin(ctx, &latch.Call{Action: "charge"})
	return c.Charge(ctx, 1) // want `unprotected call`
}

// Recursion with no way in from latch: reported.
func recursive(ctx context.Context, c *pay.Client, n int) error {
	if n == 0 {
		return nil
	}
	if err := c.Charge(ctx, n); err != nil { // want `unprotected call`
		return err
	}
	return recursive(ctx, c, n-1)
}

// Allowed, with a reason, on the line above and on the same line: silent, and summarised.
func allowed(ctx context.Context, c *pay.Client) error {
	//latch:allow test-mode charge against the sandbox account
	if err := c.Charge(ctx, 0); err != nil {
		return err
	}
	return c.Charge(ctx, 0) //latch:allow sandbox smoke test
}

// An allow without a reason suppresses nothing and is reported itself.
func allowNoReason(ctx context.Context, c *pay.Client) error {
	// want +1 `//latch:allow needs a reason`
	//latch:allow
	return c.Charge(ctx, 0) // want `unprotected call`
}

// An allow with nothing to allow is reported.
func allowUnused(ctx context.Context, c *pay.Client) (int, error) {
	// want +1 `//latch:allow suppresses nothing`
	//latch:allow balance is read-only
	return c.Balance(ctx)
}

// An allow trailing the statement above belongs to that statement, not to the next line.
func allowTrailing(ctx context.Context, c *pay.Client) error {
	_ = pay.Refund(ctx, "r") //latch:allow refund of a sandbox charge
	return c.Charge(ctx, 0)  // want `unprotected call`
}

// Package-level initialisation is never under latch.
var _ = pay.Refund(context.Background(), "init") // want `unprotected call to example.com/pay.Refund`
