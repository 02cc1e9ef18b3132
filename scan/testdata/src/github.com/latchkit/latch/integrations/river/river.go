// Package latchriver is a stand-in with the shape of latch's river wrapper.
package latchriver

import (
	"context"

	"github.com/latchkit/latch"
)

type Job struct{ ID int64 }

type Worker interface {
	Work(ctx context.Context, job *Job) error
}

func Wrap(g *latch.Guard, action string, w Worker, cfg any) Worker { return w }
