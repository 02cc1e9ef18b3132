// Package asynq is a stand-in with the shape of asynq's handler types.
package asynq

import "context"

type Task struct{ Payload []byte }

type Handler interface {
	ProcessTask(ctx context.Context, t *Task) error
}

type HandlerFunc func(ctx context.Context, t *Task) error

func (f HandlerFunc) ProcessTask(ctx context.Context, t *Task) error { return f(ctx, t) }

type ServeMux struct{}

func (m *ServeMux) Handle(pattern string, h Handler) {}

func (m *ServeMux) HandleFunc(pattern string, h func(context.Context, *Task) error) {}
