// Package latch is a stand-in with the shape of latch's wrappers, for the analyzer's tests.
package latch

import "context"

type Guard struct{}

type Call struct{ Action string }

type Options struct{}

type Pending struct{}

type Executor func(ctx context.Context, args []byte) (any, error)

func Protect[A, R any](g *Guard, action string, fn func(context.Context, A) (R, error), opts *Options) func(context.Context, A) (R, error) {
	return fn
}

func (g *Guard) Execute(ctx context.Context, call *Call, fn Executor) (any, error) {
	return fn(ctx, nil)
}

func (g *Guard) Begin(ctx context.Context, call *Call) (*Pending, error) { return &Pending{}, nil }
