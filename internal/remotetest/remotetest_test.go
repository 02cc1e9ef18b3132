package remotetest

import (
	"errors"
	"testing"
)

func TestFaults(t *testing.T) {
	t.Parallel()
	s := New(t)
	s.Fail("k", Refuse, DropReply)
	_, err := s.Act(t.Context(), "k")
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("Act after Refuse = %v, want ErrRefused", err)
	}
	if n := s.Acts("k"); n != 0 {
		t.Fatalf("Acts after Refuse = %d, want 0", n)
	}
	if _, err := s.Act(t.Context(), "k"); err == nil || errors.Is(err, ErrRefused) {
		t.Fatalf("Act after DropReply = %v, want a transport error", err)
	}
	if n := s.Acts("k"); n != 1 {
		t.Fatalf("Acts after DropReply = %d, want 1", n)
	}
	got, err := s.Act(t.Context(), "k")
	if err != nil || got != "done:k" {
		t.Fatalf("Act = %q, %v, want done:k", got, err)
	}
	if n := s.Acts("k"); n != 2 {
		t.Fatalf("Acts = %d, want 2", n)
	}
}

func TestHangUp(t *testing.T) {
	t.Parallel()
	s := New(t)
	s.Fail("k", HangUp)
	if _, err := s.Act(t.Context(), "k"); err == nil || errors.Is(err, ErrRefused) {
		t.Fatalf("Act after HangUp = %v, want a transport error", err)
	}
	if n := s.Acts("k"); n != 0 {
		t.Fatalf("Acts after HangUp = %d, want 0", n)
	}
}
