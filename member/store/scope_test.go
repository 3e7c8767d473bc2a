package store

import "testing"

func TestScopeSees(t *testing.T) {
	for _, c := range []struct {
		scope  Scope
		caller string
		want   bool
	}{
		{OperatorScope(), "", true},
		{OperatorScope(), "lead", true},
		{PeerScope("lead"), "lead", true},
		{PeerScope("lead"), "", false},
		{PeerScope("lead"), "critic", false},
		{PeerScope(""), "", false},
		{Scope{}, "", false},
		{Scope{}, "lead", false},
	} {
		if got := c.scope.sees(c.caller); got != c.want {
			t.Errorf("%+v sees a task of %q: %v, want %v", c.scope, c.caller, got, c.want)
		}
	}
}
