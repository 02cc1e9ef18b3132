// Package worker is a stand-in with the shape of Temporal's activity registry.
package worker

type ActivityRegistry interface {
	RegisterActivity(a any)
}

type Worker interface {
	ActivityRegistry
}
