package policy

import "fmt"

// Position is a 1-based line and column in a policy file.
type Position struct {
	Line, Column int
}

// Error is a policy that cannot be used: unreadable, not valid YAML, or refused by the strict
// rules of docs/policy.md. Every error returned by [Parse] and [Load] is an *Error.
type Error struct {
	File   string
	Line   int // 1-based; 0 when the file could not be read at all
	Column int // 1-based; 0 when unknown (YAML syntax errors report only a line)
	Msg    string

	err error // the underlying error, for Unwrap (read errors)
}

// Error formats the error as file:line:column: message, leaving out what is unknown.
func (e *Error) Error() string {
	switch {
	case e.Line <= 0:
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	case e.Column <= 0:
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	default:
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
	}
}

// Unwrap returns the underlying error of a read failure (so errors.Is(err, fs.ErrNotExist)
// works), or nil.
func (e *Error) Unwrap() error { return e.err }

// Pos returns the position of the error.
func (e *Error) Pos() Position { return Position{Line: e.Line, Column: e.Column} }
