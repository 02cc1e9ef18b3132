// Package latchasynq is a stand-in with the shape of latch's asynq wrapper.
package latchasynq

import (
	"github.com/hibiken/asynq"
	"github.com/latchkit/latch"
)

func Handler(g *latch.Guard, action string, h asynq.Handler, cfg any) asynq.Handler { return h }
